// What an IR pane shows across runs (issue 26): a new run leaves the last run's texts
// on show, marked stale, until its own texts replace them, pipeline by pipeline, or it
// ends without them. Emptying the pane at a run's start hid its view and laid the
// whole page out again while the run went, on the cores the run needs; the jaxpr
// then arrived while the page was busy. No DOM here: IrPane (ir.ts) draws it.

export interface IrText {
  text: string;
  /** out line -> code line (editor/linking.ts sourceMap) */
  sources: Map<number, number>;
}

export class IrTexts {
  /** the texts of the run on show */
  private current = new Map<string, IrText>();
  /** the last run's texts, on show until this run's replace them */
  private stale = new Map<string, IrText>();
  /** "main", then the compare ones */
  pipelines: readonly string[] = ["main"];
  ended = false;

  /** A new run with `pipelines`. True when the old texts cannot stay on show (the
   * pipelines changed, e.g. compare turned on or off): the pane is drawn again now. */
  reset(pipelines: readonly string[]): boolean {
    const same = pipelines.length === this.pipelines.length && pipelines.every((p, i) => p === this.pipelines[i]);
    const shown = new Map<string, IrText>();
    if (same) {
      for (const p of pipelines) {
        const out = this.shown(p);
        if (out) shown.set(p, out);
      }
    }
    this.stale = shown;
    this.current = new Map();
    this.pipelines = [...pipelines];
    this.ended = false;
    return !same;
  }

  /** This run's text of `pipeline`: it replaces the stale one. */
  set(pipeline: string, out: IrText): void {
    this.current.set(pipeline, out);
    this.stale.delete(pipeline);
  }

  /** The run ended: stale texts it did not replace go. True when some went (the pane
   * is drawn again without them). */
  end(): boolean {
    this.ended = true;
    const had = this.stale.size > 0;
    this.stale.clear();
    return had;
  }

  /** The text on show for `pipeline`: this run's, else the last run's (stale). */
  shown(pipeline: string): IrText | undefined {
    return this.current.get(pipeline) ?? this.stale.get(pipeline);
  }

  /** Whether some text on show is the last run's. */
  isStale(): boolean {
    return this.stale.size > 0;
  }

  /** Whether this run sent `pipeline`'s text (a stale one does not count). */
  has(pipeline: string): boolean {
    return this.current.has(pipeline);
  }

  /** This run's text of `pipeline` (never a stale one). */
  text(pipeline: string): string | undefined {
    return this.current.get(pipeline)?.text;
  }

  /** The pipelines with no text on show, neither this run's nor a stale one. */
  missing(): string[] {
    return this.pipelines.filter((p) => this.shown(p) === undefined);
  }

  /** Code lines that produced a line of the texts on show (the code's bands follow them). */
  codeLines(): Set<number> {
    const lines = new Set<number>();
    for (const p of this.pipelines) for (const l of this.shown(p)?.sources.values() ?? []) lines.add(l);
    return lines;
  }
}

/** The change that turns `from` into `to`, as CodeMirror takes it: the part between
 * their common start and common end (null: the same text). A run's text is mostly
 * the last run's (an edit changes a few equations): only the lines that differ are
 * drawn again, not the whole pane. */
export function minimalChange(from: string, to: string): { from: number; to: number; insert: string } | null {
  if (from === to) return null;
  const most = Math.min(from.length, to.length);
  let start = 0;
  while (start < most && from.charCodeAt(start) === to.charCodeAt(start)) start++;
  let end = 0;
  while (end < most - start && from.charCodeAt(from.length - 1 - end) === to.charCodeAt(to.length - 1 - end)) end++;
  return { from: start, to: from.length - end, insert: to.slice(start, to.length - end) };
}
