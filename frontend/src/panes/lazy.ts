// An output pane whose code is loaded on first use (a dynamic import: its own chunk,
// out of the first screen's). Calls made before it is loaded wait, in order.
import type { RunEvent, EventType } from "../connection/protocol";
import type { OutputPane } from "./pane";

export class LazyPane<P extends OutputPane> implements OutputPane {
  private pane: P | null = null;
  private loading: Promise<P> | null = null;
  private readonly waiting: ((p: P) => void)[] = [];
  /** Called once the pane has loaded and drawn what it was given meanwhile: what
   * follows a render (the editor's bands of the lines it links) must be done again,
   * for the render that the scheduler asked for drew nothing then. */
  onLoaded: (() => void) | null = null;

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
      const held = this.waiting.splice(0);
      for (const f of held) f(p);
      if (held.length > 0) this.onLoaded?.();
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
