// An output pane whose code is loaded on first use (a dynamic import: its own chunk,
// out of the first screen's). Calls made before it is loaded wait, in order.
import type { RunEvent, EventType } from "../connection/protocol";
import type { OutputPane } from "./pane";

export class LazyPane<P extends OutputPane> implements OutputPane {
  private pane: P | null = null;
  private loading: Promise<P> | null = null;
  private readonly waiting: ((p: P) => void)[] = [];

  constructor(
    readonly consumes: readonly EventType[],
    private readonly load: () => Promise<P>,
  ) {}

  /** The pane, once loaded. */
  get(): P | null {
    return this.pane;
  }

  /** Loads the pane (once); resolves with it. */
  ready(): Promise<P> {
    this.loading ??= this.load().then((p) => {
      // the events it was declared to take are the pane's own (or some would go astray)
      if (p.consumes.join() !== this.consumes.join()) throw new Error(`LazyPane: declared ${this.consumes.join()}, the pane takes ${p.consumes.join()}`);
      this.pane = p;
      for (const f of this.waiting.splice(0)) f(p);
      return p;
    });
    return this.loading;
  }

  private with(f: (p: P) => void): void {
    if (this.pane) f(this.pane);
    else {
      this.waiting.push(f);
      void this.ready();
    }
  }

  /** The loaded pane's code lines (none before it is loaded). */
  codeLines(): Set<number> {
    return this.pane?.codeLines?.() ?? new Set();
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.with((p) => p.reset(pipelines, labels));
  }

  show(event: RunEvent, pipeline: string): void {
    this.with((p) => p.show(event, pipeline));
  }

  end(): void {
    this.with((p) => p.end());
  }
}
