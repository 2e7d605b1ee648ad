// What every output pane is to the page: it names the events it renders, and renders
// them itself. main.ts only routes each event to the panes that consume it (and keeps
// the run-level things: progress, the error marker in the editor, the tabs).
import type { EventType, RunEvent } from "../protocol";

export interface OutputPane {
  /** the event types this pane renders */
  readonly consumes: readonly EventType[];
  /** a new run: its pipelines ("main", then the compare ones) and their labels */
  reset(pipelines: string[], labels: Record<string, string>): void;
  /** one event of a type in `consumes`, of `pipeline` */
  show(event: RunEvent, pipeline: string): void;
  /** the run ended, however it ended */
  end(): void;
  /** a badge for its tab (a count), when it keeps one */
  badge?(): string;
}
