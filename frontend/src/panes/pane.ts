// What every output pane is to the page: it names the events it renders, and renders
// them itself. main.ts only routes each event to the panes that consume it (and keeps
// the run-level things: progress, the error marker in the editor, the tabs).
import type { EventOf, EventType, RunEvent } from "../connection/protocol";

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
  /** the code lines its hover links to, when it links any: the editor bands them while
   * its tab is on show, which is what lets a hover light them (editor/linking.ts lights banded
   * lines only) */
  codeLines?(): Set<number>;
}

/** A pane that keeps the one event of its type each pipeline sends and redraws from
 * them all (asm, memory, sharding). Subclasses draw; they call `render()` once built. */
export abstract class PerPipelinePane<K extends EventType> implements OutputPane {
  abstract readonly consumes: readonly [K];
  protected readonly events = new Map<string, EventOf<K>>();
  protected pipelines: string[] = ["main"];
  protected labels: Record<string, string> = {};
  protected ended = false;

  constructor(readonly root: HTMLElement) {}

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.events.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.ended = false;
    this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type !== this.consumes[0]) return;
    this.events.set(pipeline, event as EventOf<K>);
    this.render();
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  protected abstract render(): void;
}

/** A pane that shows the last event of its one type a run sent (remarks, recompiles),
 * whichever pipeline sent it. Subclasses draw from `event` (null: none yet, `ended`
 * telling "none in this run" from "waiting"); they call `render()` once built. */
export abstract class LastEventPane<K extends EventType> implements OutputPane {
  abstract readonly consumes: readonly [K];
  protected event: EventOf<K> | null = null;
  protected ended = false;

  constructor(readonly root: HTMLElement) {}

  reset(): void {
    this.event = null;
    this.ended = false;
    this.render();
  }

  show(event: RunEvent): void {
    if (event.type !== this.consumes[0]) return;
    this.event = event as EventOf<K>;
    this.render();
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  protected abstract render(): void;
}
