// Rendering off the critical path: an event goes at once to the panes of the tab on
// show; the other panes get theirs when their tab is shown, or when the page is idle
// after the run ended, one pane per idle slice (a 10,000-line HLO never stands between
// an event and the jaxpr on screen, and while a run goes the machine's cores are the
// run's: on a small machine the browser and the server share them). Panes loaded on
// first use (lazy) are fed only when shown.
import type { RunEvent } from "../connection/protocol";
import type { OutputPane } from "./pane";
import type { TabId } from "../model/tabtable";

/** A run's start is drawn this long (ms) after it starts, unless it ended first (its
 * status and the cancel button; the IR panes' stale mark later, panes/ir.ts STALE_MS):
 * a warm edit's jaxpr comes sooner, and no frame is drawn between the key and the
 * jaxpr. Each was a style pass, a layout, a paint and a raster, with their animations'
 * frames, on the cores the run needs (issue 26). */
export const START_DRAW_MS = 100;

/** Runs `work` when the page is idle (requestIdleCallback where there is one). */
export type IdleScheduler = (work: () => void) => void;

export const whenIdle: IdleScheduler = (work) => {
  const ric = (globalThis as { requestIdleCallback?: (cb: () => void, o?: { timeout: number }) => number }).requestIdleCallback;
  if (ric) ric(work, { timeout: 500 });
  else setTimeout(work, 1);
};

/** Runs `work` once the next frame has been painted (a task after the animation
 * frame): for what need not be in the frame that shows an output (the code lines
 * banded, the links drawn again). Without animation frames (tests): a task. */
export function afterPaint(work: () => void): void {
  const raf = (globalThis as { requestAnimationFrame?: (cb: () => void) => number }).requestAnimationFrame;
  if (raf) raf(() => setTimeout(work, 0));
  else setTimeout(work, 0);
}

/** `work` run after the next paint, however often it is asked for before then. */
export class AfterPaint {
  private queued = false;

  constructor(
    private readonly work: () => void,
    private readonly later: (work: () => void) => void = afterPaint,
  ) {}

  soon(): void {
    if (this.queued) return;
    this.queued = true;
    this.later(() => {
      this.queued = false;
      this.work();
    });
  }
}

/** `work` run at most once per `ms` however often it is asked for (`soon`), the first
 * time `ms` after the last run; `now` runs it at once (and drops a run pending). */
export class Throttled {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private last = -Infinity;

  constructor(
    private readonly work: () => void,
    private readonly ms: number,
    private readonly clock: () => number = () => performance.now(),
    private readonly timers: { set: (f: () => void, ms: number) => ReturnType<typeof setTimeout>; clear: (t: ReturnType<typeof setTimeout>) => void } = {
      set: (f, ms) => setTimeout(f, ms),
      clear: (t) => clearTimeout(t),
    },
  ) {}

  soon(): void {
    if (this.timer !== null) return;
    this.timer = this.timers.set(() => this.now(), Math.max(0, this.last + this.ms - this.clock()));
  }

  /** Runs `work` once `ms` (or `delay`) from now (the interval starts again), unless
   * asked `now`. */
  after(delay = this.ms): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.last = this.clock();
    this.timer = this.timers.set(() => this.now(), delay);
  }

  now(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
    this.last = this.clock();
    this.work();
  }
}

export interface ScheduledPane {
  tab: TabId;
  pane: OutputPane;
  /** fed only when its tab is shown (its code is loaded on first use) */
  lazy?: boolean;
}

/** An event whose text is longer than this (characters) is drawn in a task of its own,
 * after the one that received and parsed it: a 1,000-layer MLP's 22,000-line jaxpr took
 * ~100 ms to parse and check and ~90 ms to draw, one 211 ms task when drawn at once. */
export const OWN_TASK_CHARS = 256 * 1024;

function isBig(item: Pending): boolean {
  if (item.kind !== "show") return false;
  const text = (item.event as { text?: unknown }).text;
  return typeof text === "string" && text.length > OWN_TASK_CHARS;
}

/** Runs `work` in a task of its own, soon (a message to itself: no timer's clamping). */
export function nextTask(work: () => void): void {
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    channel.port1.close();
    work();
  };
  channel.port2.postMessage(null);
}

type Pending = { kind: "reset"; pipelines: string[]; labels: Record<string, string> } | { kind: "show"; event: RunEvent; pipeline: string } | { kind: "end" };

export class PaneScheduler {
  private readonly pending = new Map<OutputPane, Pending[]>();
  private idleQueued = false;
  /** panes whose queue is drawn in the next task */
  private readonly soon = new Set<OutputPane>();
  /** a run is going (from its reset to its end): held panes wait for its end */
  private live = false;

  constructor(
    private readonly panes: readonly ScheduledPane[],
    private readonly activeTab: () => TabId,
    private readonly idle: IdleScheduler = whenIdle,
    /** after a pane rendered what it held back (its tab's badge) */
    private readonly rendered: (entry: ScheduledPane) => void = () => {},
    private readonly later: (work: () => void) => void = nextTask,
  ) {}

  /** The panes of `tab`. */
  entries(tab: TabId): ScheduledPane[] {
    return this.panes.filter((p) => p.tab === tab);
  }

  /** The panes that render events of `type`. */
  consumers(type: RunEvent["type"]): ScheduledPane[] {
    return this.panes.filter((p) => p.pane.consumes.includes(type));
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.live = true;
    for (const p of this.panes) {
      this.pending.set(p.pane, []); // what was held back for the old run is dropped
      this.apply(p, { kind: "reset", pipelines, labels });
    }
  }

  show(entry: ScheduledPane, event: RunEvent, pipeline: string): void {
    this.apply(entry, { kind: "show", event, pipeline });
  }

  end(): void {
    this.live = false;
    for (const p of this.panes) this.apply(p, { kind: "end" });
  }

  /** Whether `pane` holds events it has not rendered yet. */
  holds(pane: OutputPane): boolean {
    return (this.pending.get(pane)?.length ?? 0) > 0;
  }

  /** Renders what the panes of `tab` hold back (their tab is being shown). */
  flushTab(tab: TabId): void {
    for (const p of this.panes) if (p.tab === tab) this.flush(p);
  }

  private apply(entry: ScheduledPane, item: Pending): void {
    const queue = this.pending.get(entry.pane) ?? [];
    const onShow = entry.tab === this.activeTab();
    if (queue.length === 0 && onShow && !isBig(item)) {
      run(entry.pane, item);
      return;
    }
    queue.push(item);
    this.pending.set(entry.pane, queue);
    // a big text on show: drawn in the next task (what comes after it for the same pane
    // waits in its queue, in order); on a tab not on show: when shown, or on idle
    if (onShow) this.flushSoon(entry);
    else if (!entry.lazy && !this.live) this.idleSoon();
  }

  private flushSoon(entry: ScheduledPane): void {
    if (this.soon.has(entry.pane)) return;
    this.soon.add(entry.pane);
    this.later(() => {
      this.soon.delete(entry.pane);
      this.flush(entry);
    });
  }

  private flush(entry: ScheduledPane): void {
    const queue = this.pending.get(entry.pane);
    if (!queue || queue.length === 0) return;
    this.pending.set(entry.pane, []);
    // a reset drops every item before it: only the newest run's items are rendered
    let from = 0;
    for (let i = queue.length - 1; i >= 0; i--) {
      if (queue[i]!.kind === "reset") {
        from = i;
        break;
      }
    }
    for (const item of queue.slice(from)) run(entry.pane, item);
    this.rendered(entry);
  }

  private idleSoon(): void {
    if (this.idleQueued) return;
    this.idleQueued = true;
    this.idle(() => {
      this.idleQueued = false;
      if (this.live) return; // a new run started: its end schedules again
      // one pane per idle slice; the next slice takes the next one
      const next = this.panes.find((p) => !p.lazy && this.holds(p.pane));
      if (!next) return;
      this.flush(next);
      if (this.panes.some((p) => !p.lazy && this.holds(p.pane))) this.idleSoon();
    });
  }
}

function run(pane: OutputPane, item: Pending): void {
  if (item.kind === "reset") pane.reset(item.pipelines, item.labels);
  else if (item.kind === "show") pane.show(item.event, item.pipeline);
  else pane.end();
}
