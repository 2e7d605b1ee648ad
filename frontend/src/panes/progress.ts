// Stage progress: one chip per stage as it finishes, per pipeline; the run's status.
// The status element's `data-status` is the run's state as it is now (scripts and tests
// wait on it); its look (`data-drawn`, its words, the chips) is drawn at most every
// PROGRESS_MS while a run goes, the first time START_DRAW_MS after its start: a warm
// edit's jaxpr comes before that, and no frame is drawn between the key and the jaxpr
// (issue 26: each was a layout, a paint and a raster on the cores the run needs).
import { START_DRAW_MS, Throttled } from "./render";
import { clear, h } from "../util/dom";
import { fmtMs } from "../util/format";

/** While a run goes, its status and chips are drawn at most this often (ms); its end
 * at once. */
export const PROGRESS_MS = 100;

const MAIN_STAGES = ["exec", "args", "trace", "lower", "compile", "execute", "timing"];
const COMPARE_STAGES = ["trace", "lower", "compile", "execute"];

type StageState = { ms: number | null; failed?: boolean };

export type RunStatus = "idle" | "queued" | "running" | "ok" | "error" | "timeout" | "killed" | "cancelled";

/** A run still going after this long (ms) shows its time and what it is doing, redrawn
 * once a second (a warm edit is over long before, and draws none of it). */
export const LONG_RUN_MS = 1000;

/** What a run waits for before a worker takes it: a sandbox not started yet (a JAX
 * version's, or one with libraries), with the time it takes (measured). */
export interface SandboxWait {
  what: string;
  expectedMs: number;
}

export class Progress {
  private stages = new Map<string, Map<string, StageState>>();
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  private status: RunStatus = "idle";
  private detail = "";
  /** the note on show belongs to the run on show (else it goes with the next draw) */
  private noteDrawn = true;
  private rows: HTMLElement;
  private statusEl: HTMLElement;
  private workerEl: HTMLElement;
  private noteEl: HTMLElement;
  /** the status and the chips drawn again, at most every PROGRESS_MS while a run goes */
  private readonly drawing = new Throttled(() => this.draw(), PROGRESS_MS);
  /** whether the status drawn is a live one (queued, running), and who follows it */
  private drawnLive = false;
  private readonly liveListeners: ((live: boolean) => void)[] = [];
  /** when the run on show started (performance.now()) */
  private startedAt = 0;
  /** the sandbox the run waits for, said while it is queued */
  private wait: SandboxWait | null = null;
  /** the slow outputs the run asked for (Profile, Kernels…): named while they are made */
  private extras: string[] = [];
  /** the once-a-second redraw of a long run */
  private tick: ReturnType<typeof setTimeout> | null = null;
  private waitEl: HTMLElement;

  constructor(readonly root: HTMLElement) {
    this.statusEl = h("span", { class: "run-status", role: "status", "aria-live": "polite", "data-status": "idle", "data-drawn": "idle" });
    this.workerEl = h("span", { class: "worker" });
    this.noteEl = h("span", { class: "run-note" });
    this.rows = h("div", { class: "stage-rows" });
    this.waitEl = h("div", { class: "sandbox-wait", "data-testid": "sandbox-wait", hidden: true });
    root.append(h("div", { class: "status-line" }, this.statusEl, this.workerEl, this.noteEl), this.waitEl, this.rows);
    this.drawing.now();
  }

  reset(pipelines: string[], labels: Record<string, string>, wait: SandboxWait | null = null, extras: string[] = []): void {
    this.startedAt = performance.now();
    this.wait = wait;
    this.extras = extras;
    this.pipelines = pipelines;
    this.labels = labels;
    this.stages = new Map(pipelines.map((p) => [p, new Map()]));
    this.setStatus("queued");
    this.detail = "";
    // the run's start is drawn START_DRAW_MS from now (the last run's status and note
    // on show until then), or at once if it ends first
    this.noteDrawn = false;
    this.drawing.after(START_DRAW_MS);
  }

  /** The worker of the run on show (kept from the last run until the next one's
   * `accepted` says its own: no layout between). */
  setWorker(text: string): void {
    if (this.workerEl.textContent !== text) this.workerEl.textContent = text;
  }

  /** `listener` is told when the status drawn becomes live (queued, running) or not:
   * the cancel button follows what the status says. */
  onLive(listener: (live: boolean) => void): void {
    this.liveListeners.push(listener);
  }

  /** A note after the worker (e.g. that the answer came from the cache); none: cleared. */
  setNote(...content: (Node | string)[]): void {
    this.noteEl.replaceChildren(...content);
    this.noteDrawn = true;
  }

  started(): void {
    if (this.status === "queued") this.setStatus("running");
    this.drawing.soon();
  }

  stage(pipeline: string, stage: string, ms: number | null): void {
    // timing is one stage for the whole run; show it on the main row
    const p = stage === "timing" ? this.pipelines[0]! : pipeline;
    if (!this.stages.has(p)) this.stages.set(p, new Map());
    this.stages.get(p)!.set(stage, { ms });
    this.started();
  }

  failed(pipeline: string, stage: string | null | undefined): void {
    if (!stage) return;
    if (!this.stages.has(pipeline)) this.stages.set(pipeline, new Map());
    this.stages.get(pipeline)!.set(stage, { ms: null, failed: true });
    this.drawing.soon();
  }

  done(status: string, ms: number | null | undefined, reason: string | null | undefined): void {
    this.setStatus((["ok", "error", "timeout", "killed", "cancelled"].includes(status) ? status : "error") as RunStatus);
    this.detail = [ms != null ? `in ${fmtMs(ms)}` : "", reason ?? ""].filter(Boolean).join(" — ");
    this.drawing.now(); // the run's end, at once
  }

  problem(message: string): void {
    this.setStatus("error");
    this.detail = message;
    this.drawing.now();
  }

  isLive(): boolean {
    return this.status === "queued" || this.status === "running";
  }

  /** The run's state, in `data-status` at once: no style reads it, so no frame is
   * drawn for it (the look follows with the next draw). */
  private setStatus(status: RunStatus): void {
    this.status = status;
    if (this.statusEl.dataset.status !== status) this.statusEl.dataset.status = status;
  }

  private draw(): void {
    // the last run's note (e.g. "cached") goes with the first draw of a new run
    if (!this.noteDrawn && this.noteEl.firstChild) this.noteEl.replaceChildren();
    this.noteDrawn = true;
    this.drawStatus();
    this.drawWait();
    this.renderRows();
    // a long run: drawn again each second (its time, the sandbox's bar) while it goes
    if (this.tick !== null) clearTimeout(this.tick);
    this.tick = null;
    if (this.isLive()) {
      const elapsed = performance.now() - this.startedAt;
      const next = elapsed < LONG_RUN_MS && this.wait === null ? LONG_RUN_MS - elapsed : this.wait !== null && this.status === "queued" ? 250 : 1000;
      this.tick = setTimeout(() => ((this.tick = null), this.isLive() && this.drawing.now()), next);
    }
  }

  /** The sandbox the queued run waits for, with a bar against its measured time. */
  private drawWait(): void {
    const waiting = this.wait !== null && this.status === "queued";
    if (!waiting) {
      if (!this.waitEl.hidden) this.waitEl.hidden = true;
      return;
    }
    const w = this.wait!;
    const elapsed = performance.now() - this.startedAt;
    const bar = h("progress", { max: w.expectedMs, value: Math.min(elapsed, w.expectedMs), "aria-label": `starting ${w.what}` });
    const over = elapsed > w.expectedMs ? " (taking longer than usual: the machine is busy)" : "";
    const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
    this.waitEl.replaceChildren(`Starting ${w.what}: its first run here takes about ${secs(w.expectedMs)} (measured); ${secs(elapsed)} so far${over} `, bar);
    this.waitEl.hidden = false;
  }

  /** What a long run is doing now: its time, and the stage after the last one done
   * (or the slow outputs it asked for, once the stages are through). */
  private longRunText(): string {
    const elapsed = performance.now() - this.startedAt;
    if (this.status !== "running" || elapsed < LONG_RUN_MS) return "";
    const seen = this.stages.get(this.pipelines[0]!) ?? new Map<string, StageState>();
    const last = MAIN_STAGES.reduce((m, st, j) => (seen.has(st) ? j : m), -1);
    const through = last >= MAIN_STAGES.indexOf("execute");
    const next = MAIN_STAGES[last + 1] ?? "";
    const now = through ? [next, ...this.extras].filter(Boolean).join(", ") : next;
    return `· ${(elapsed / 1000).toFixed(0)} s${now ? ` · now: ${now}` : ""}`;
  }

  private drawStatus(): void {
    const words: Record<RunStatus, string> = {
      idle: "Ready — Ctrl+Enter runs",
      queued: this.wait ? "Waiting for its sandbox…" : "Waiting for a worker…",
      running: "Running…",
      ok: "Done",
      error: "Error",
      timeout: "Timed out",
      killed: "Killed",
      cancelled: "Cancelled",
    };
    const text = [words[this.status], this.detail, this.longRunText()].filter(Boolean).join(" ");
    // unchanged (a stage came while running): left alone, the page not laid out again
    if (this.statusEl.dataset.drawn !== this.status) this.statusEl.dataset.drawn = this.status;
    if (this.statusEl.textContent !== text) this.statusEl.textContent = text;
    const live = this.isLive();
    if (live !== this.drawnLive) {
      this.drawnLive = live;
      for (const l of this.liveListeners) l(live);
    }
  }

  private renderRows(): void {
    clear(this.rows);
    if (this.status === "idle") return;
    const live = this.isLive();
    this.pipelines.forEach((p, i) => {
      const seen = this.stages.get(p) ?? new Map<string, StageState>();
      const order = i === 0 ? MAIN_STAGES : COMPARE_STAGES;
      // the stage after the last one seen is the one running (a cached run skips some)
      const lastSeen = order.reduce((m, s, j) => (seen.has(s) ? j : m), -1);
      const nextIdx = lastSeen + 1;
      const chips = order.map((s, j) => {
        const st = seen.get(s);
        let cls = "pending";
        let text = s;
        if (st?.failed) cls = "failed";
        else if (st) {
          cls = "done";
          text = `${s} ${fmtMs(st.ms)}`;
        } else if (live && j === nextIdx) cls = "running";
        else if (!live) cls = this.status === "ok" ? "unseen" : "skipped";
        return h("li", { class: `stage ${cls}`, "data-stage": s }, text);
      });
      const name = this.pipelines.length > 1 ? `${i === 0 ? "A" : "B"}: ${this.labels[p] ?? p}` : (this.labels[p] ?? "");
      this.rows.append(
        h("div", { class: "stage-row", "data-pipeline": p }, h("span", { class: `stage-pipe ${i === 0 ? "pipe-a" : "pipe-b"}` }, name), h("ol", { class: "stages", "aria-label": `stages of ${name || "the run"}` }, chips)),
      );
    });
  }
}
