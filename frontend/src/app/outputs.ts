// What a run does to the page (the RunView app/run.ts drives, and the connection's
// problems): the outputs cleared when a run starts, each event routed to the panes
// that consume it (panes/render.ts: the pane on show at once), the progress line, the
// error marker in the editor, the tabs (app/tabs.ts), the Errors pane, a warning on a
// tampered run, and an opt-in output not asked for offered as one click.
import type { EditorView } from "@codemirror/view";
import type { ArgsFollower } from "../controls/args";
import { h } from "../util/dom";
import { setErrorMark } from "../editor/editor";
import { localHint } from "../i18n";
import { setRecompileMarks } from "../editor/editor-recompiles";
import { setNumericsMarks } from "../editor/editor-numerics";
import { PRECISION_SETTINGS } from "../panes/numerics";
import { setShapes, setShapesLeftOut } from "../editor/editor-shapes";
import { fmtAgo } from "../util/format";
import type { Output, RunBody } from "../generated/request";
import type { Layout } from "./layout";
import { openComputeAt } from "../controls/compute";
import { OUTPUT_PANES, optInOutput, outputTitle } from "../model/registry";
import { precisionNote } from "../model/precision";
import { isTampered, pipelineOf, type RunEvent } from "../connection/protocol";
import { describeSignature, isArgCountError } from "../model/signature";
import type { SandboxWait } from "../panes/progress";
import type { PlayState } from "../model/state";
import { outputRefusal } from "../model/targets";
import { describePipeline, type StepProblem } from "../model/transforms";
import type { ProblemAction } from "../panes/errors";
import type { Panes } from "./panes";
import { AfterPaint } from "../panes/render";
import type { RunController, RunView } from "./run";
import type { PlayStore } from "./store";
import type { TabController } from "./tabs";
import { TextParts } from "../connection/text-parts";
import { timeoutText } from "./timeout-text";
import type { TabId } from "../model/tabtable";

/** The Errors card's title for a run that ended badly without an error event. */
const DONE_TITLES: Record<string, string | undefined> = {
  error: "The run ended with an error",
  timeout: "The run took too long",
  killed: "The run was stopped",
};

/** Errors that say the args do not fit the code (a shape, a type, an index): said in the
 * args box's note when the page proposed them (controls/args.ts). */
const ARGS_REFUSED = /^(TypeError|ValueError|IndexError|ShapeError)$/;
const ARGS_WORDS = /shape|ndim|dimension|rank|broadcast|scalar[- ]output|index|dtype|operand/i;

/** A JAX version's first run on this machine waited this long for its sandbox (issue
 * 35's measurement, on the page; docs/frontend.md#waiting). */
export const SANDBOX_START_MS = 4500;

/** Which sandbox a request runs in: its JAX version and libraries. */
export function sandboxKey(request: Pick<RunBody, "jax_version" | "libraries">): string {
  const libs = Object.entries(request.libraries ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify([request.jax_version ?? "", libs]);
}

/** The slow outputs a request asks for, by their tabs' names (the progress line names
 * them while they are made). */
export function slowOutputs(request: Pick<RunBody, "outputs" | "checks">): string[] {
  const slow: Output[] = ["trace_values", "autodiff", "kernels", "profile"];
  const named = slow.filter((o) => request.outputs?.includes(o)).map(outputTitle);
  return request.checks?.length ? [...named, "Checks"] : named;
}

export interface OutputsDeps {
  ui: Pick<Layout, "cancelBtn" | "banner" | "offer" | "outputBoxes" | "compute">;
  store: PlayStore;
  panes: Panes;
  tabs: TabController;
  editor: () => EditorView;
  follower: ArgsFollower;
  /** the code lines banded follow the IR text on show */
  refreshBands: () => void;
  /** the hovered and pinned lines drawn again */
  refreshLinks: () => void;
  runs: () => RunController;
  /** runs the state again (the offer's button, the args fix) */
  run: () => void;
  /** runs the state again with this wall-clock limit (a run that ran out of time) */
  runWithTimeout?: (timeoutS: number) => void;
  /** the longest `timeout_s` the server allows (its hello's limits), when known */
  maxTimeoutS?: () => number | null;
}

export class OutputsController implements RunView {
  /** the pipelines' labels for the run on show (A, B: their transforms) */
  private labels: Record<string, string> = {};
  /** the code lines banded and the links drawn again after the output is painted: two
   * editor updates that need not stand between an event and its text on screen */
  private readonly links: AfterPaint;
  /** the editor's `# ^?` lines and hovers (a `shapes` event: it follows the jaxpr at
   * once), set after the jaxpr's frame is painted */
  private readonly shapes: AfterPaint;
  private pendingShapes: { spans: Parameters<typeof setShapes.of>[0]; leftOut: number } | null = null;
  /** the pipelines of the last run started: the IR panes keep their texts on show
   * (stale) for a run of the same pipelines, so the bands stay as they are */
  private lastPipelines = "";
  /** whether the editor shows an error mark (cleared at a run's start only if so: an
   * editor update is a measure in the next frame) */
  private errorMarked = false;
  /** a big IR text's parts, joined before any pane sees it */
  private readonly parts = new TextParts();
  /** the sandboxes (a JAX version and its libraries) that answered a run of this page:
   * the next run on one of them finds it started */
  private readonly warmSandboxes = new Set<string>([sandboxKey({})]);
  private sandboxKey = sandboxKey({});
  /** the run's `config` (its matmul precision, if it sets one: model/precision.ts) */
  private runConfig: RunBody["config"] | null = null;

  constructor(private readonly d: OutputsDeps) {
    // the Numerics pane's "compare precision settings": one run with every setting
    d.panes.numerics.onCompare = () => {
      d.store.state.numericsPrecision = [...PRECISION_SETTINGS];
      try {
        d.run(); // the request is made before the run's first wait
      } finally {
        d.store.state.numericsPrecision = undefined;
      }
    };
    // the cancel button follows the status drawn (a run's start is drawn START_DRAW_MS
    // after it, panes/render.ts: a warm edit draws nothing before its jaxpr)
    d.panes.progress.onLive((live) => {
      d.ui.cancelBtn.disabled = !live;
      document.body.classList.toggle("running", live);
    });
    this.links = new AfterPaint(() => {
      this.d.refreshBands();
      this.d.refreshLinks();
    });
    this.shapes = new AfterPaint(() => {
      const shapes = this.pendingShapes;
      this.pendingShapes = null;
      if (shapes !== null) this.d.editor().dispatch({ effects: [setShapesLeftOut.of(shapes.leftOut), setShapes.of(shapes.spans)] });
    });
  }

  /** Labels the pipelines of the run about to start from `state`. */
  label(state: PlayState, request: RunBody): void {
    this.labels = { main: describePipeline(state.steps, request.entry) };
    if (state.compare) this.labels["0"] = describePipeline(state.compare, request.entry);
  }

  mark(tab: TabId, badge?: string): void {
    this.d.tabs.mark(tab, badge);
  }

  /** A run starts (sent, or painted from the page): the outputs are cleared for it
   * (the IR texts kept on show, stale, until the run's replace them), unless it
   * follows a painted run (`keep`): its outputs then replace the painted ones. Only
   * what changes is written, and what a warm edit changes is drawn later: its status
   * and the cancel button START_DRAW_MS after the start (panes/render.ts), the tabs'
   * dots at its end: no frame is drawn between the key and the jaxpr. */
  start(request: RunBody, keep = false): void {
    const { ui, panes } = this.d;
    this.runConfig = request.config ?? null;
    if (keep) {
      ui.cancelBtn.disabled = false;
      document.body.classList.add("running");
      return;
    }
    panes.errors.reset();
    this.parts.reset();
    if (!ui.banner.hidden) ui.banner.hidden = true;
    if (!ui.offer.hidden) ui.offer.hidden = true;
    const pipelines = ["main", ...(request.compare ?? []).map((_, i) => String(i))];
    panes.scheduler.reset(pipelines, this.labels);
    this.sandboxKey = sandboxKey(request);
    panes.progress.reset(pipelines, this.labels, this.sandboxWait(request), slowOutputs(request));
    this.pendingShapes = null; // the last run's, not set yet: this run's replace them
    if (this.errorMarked) this.d.editor().dispatch({ effects: setErrorMark.of(null) });
    this.errorMarked = false;
    this.d.editor().dispatch({ effects: setRecompileMarks.of([]) });
    this.d.editor().dispatch({ effects: setNumericsMarks.of([]) });
    // the bands follow the IR texts: drawn again only when the panes were cleared
    if (pipelines.join("\n") !== this.lastPipelines) this.links.soon();
    this.lastPipelines = pipelines.join("\n");
    this.d.tabs.runStarts();
    this.d.follower.runStarts();
    this.d.tabs.badge("errors", "");
    this.d.tabs.badge("console", "");
  }

  event(event: RunEvent): void {
    for (const whole of this.parts.accept(event)) this.route(whole);
  }

  private route(event: RunEvent): void {
    const { panes, tabs } = this.d;
    const p = pipelineOf(event);
    for (const entry of panes.scheduler.consumers(event.type)) {
      panes.scheduler.show(entry, event, p);
      this.mark(entry.tab, panes.scheduler.holds(entry.pane) ? undefined : entry.pane.badge?.());
      tabs.outputArrived(entry.tab);
    }
    switch (event.type) {
      case "accepted": {
        this.warmSandboxes.add(this.sandboxKey);
        const w = event.worker;
        panes.progress.setWorker(!w ? "" : [w.backend ?? w.platform, w.device_kind, w.devices ? `${w.devices} device${w.devices === 1 ? "" : "s"}` : "", w.jax_version ? `jax ${w.jax_version}` : "", precisionNote(w, this.runConfig)].filter(Boolean).join(" · "));
        if (event.cached === true) panes.progress.setNote(this.cachedNote(event.age_s, event.cached_at));
        panes.progress.started();
        break;
      }
      case "stage":
        panes.progress.stage(p, event.stage, event.ms ?? null);
        break;
      case "shapes": // the editor's hovers and `# ^?` lines (editor/editor-shapes.ts): pipeline A's
        if (p === "main") {
          this.pendingShapes = { spans: event.spans, leftOut: event.spans_left_out ?? 0 };
          this.shapes.soon();
        }
        break;
      case "recompiles": // each call site's line marked in the editor (editor/editor-recompiles.ts)
        this.d.editor().dispatch({ effects: setRecompileMarks.of(event.sites.filter((s) => s.jitted).map((s) => ({ line: s.line, text: s.summary }))) });
        break;
      case "numerics": // each line tinted by the ulps born there (editor/editor-numerics.ts): pipeline A's
        if (p === "main") this.d.editor().dispatch({ effects: setNumericsMarks.of(event.lines.map((l) => ({ line: l.line, bornUlp: l.born_ulp, hint: l.hint ?? null }))) });
        break;
      case "jaxpr":
      case "stablehlo":
      case "hlo":
        // the code lines banded and linked follow the text on show
        if (tabs.active === event.type || tabs.active === "graph") this.links.soon();
        break;
      case "error": {
        panes.errors.addRunError(event, this.pipelineLabel(p));
        if (isArgCountError(event.kind, event.message)) this.explainArgCount(event.message);
        else if (p === "main" && ARGS_REFUSED.test(event.kind) && ARGS_WORDS.test(event.message)) this.d.follower.refused(event.message);
        this.mark("errors", String(panes.errors.size()));
        panes.progress.failed(p, event.stage);
        if (event.line != null && event.line > 0) {
          this.d.editor().dispatch({ effects: setErrorMark.of({ line: event.line, kind: event.kind, hint: localHint(event.hint ?? "") }) });
          this.errorMarked = true;
        }
        const pane = panes.activeIr();
        if (!pane || !pane.has(p)) tabs.select("errors");
        break;
      }
      case "done": {
        const status: string = event.status;
        panes.progress.done(status, event.ms, event.reason);
        if (isTampered(status)) {
          this.d.ui.banner.textContent = "⚠ this run's code wrote to jaxplay's output channel; what it shows may be forged";
          this.d.ui.banner.hidden = false;
        }
        this.ended();
        // a run that failed with no error event (its worker died, its time ran out): the
        // reason `done` gives is all there is, said in Errors like any other failure
        if (status !== "ok" && status !== "cancelled" && !isTampered(status) && panes.errors.size() === 0) {
          const longer = this.longerRun(event);
          const reason = event.reason ? timeoutText(event.reason, longer !== undefined) : "The server gave no reason.";
          panes.errors.addProblem(DONE_TITLES[status] ?? "The run ended with an error", reason, undefined, longer);
          this.mark("errors", String(panes.errors.size()));
          const pane = panes.activeIr();
          if (!pane || !pane.has(p)) tabs.select("errors");
        }
        if (panes.errors.size() === 0) tabs.runEndedClean();
        break;
      }
    }
  }

  /** A run out of time in a stage it had not finished: one click runs it again with the
   * server's longest limit, when that is longer than what this run had. */
  private longerRun(event: Extract<RunEvent, { type: "done" }>): ProblemAction | undefined {
    const max = this.d.maxTimeoutS?.() ?? null;
    const rerun = this.d.runWithTimeout;
    if (event.status !== "timeout" || !event.timeout_stage || max === null || !rerun) return undefined;
    const had = (event.ms ?? 0) / 1000;
    if (max <= had + 1) return undefined;
    return { label: `Run again with up to ${Math.round(max)} s`, testid: "run-longer", onClick: () => rerun(max) };
  }

  unreachable(message: string): void {
    this.d.panes.progress.problem(`— ${message}`);
    this.d.panes.errors.addProblem("Cannot reach the server", message);
    this.mark("errors", String(this.d.panes.errors.size()));
    this.ended();
  }

  /** The server refused a message (`seq` -1: not a run's). */
  problem(seq: number, message: string, status: number | null | undefined, field: string | null | undefined): void {
    const { panes } = this.d;
    const title = status === 422 ? "The server refused the request" : status === 429 || status === 503 ? "The server is busy" : "Server problem";
    panes.errors.addProblem(title, field ? `${message} (field: ${field})` : message);
    this.mark("errors", String(panes.errors.size()));
    if (seq !== -1) {
      panes.progress.problem(status ? `(${status})` : "");
      this.ended();
      this.d.tabs.select("errors");
    }
  }

  /** The connection dropped the run on show. */
  dropped(why: string): void {
    this.d.panes.progress.problem(`— ${why}`);
    this.d.panes.errors.addProblem("Connection lost", why);
    this.ended();
  }

  /** The request could not be made (a transform option, the mesh): said in Errors. */
  showProblems(problems: StepProblem[]): void {
    const { panes } = this.d;
    panes.errors.reset();
    this.mark("console", "");
    const title = (pr: StepProblem): string => (pr.step >= 0 ? "A transform option does not parse" : pr.option === "compile for" ? "The run does not go with what it compiles for" : "The mesh or a PartitionSpec does not parse");
    for (const pr of problems) panes.errors.addProblem(title(pr), pr.step < 0 ? `${pr.option}: ${pr.message}` : `step ${pr.step + 1}, ${pr.option}: ${pr.message}`);
    this.mark("errors", String(problems.length));
    panes.progress.problem("— fix the transform options first");
    this.d.tabs.select("errors");
  }

  /** The Errors and Console badges cleared (an across run: its view says the rest). */
  clearErrors(): void {
    this.d.panes.errors.reset();
    this.d.panes.errors.ended();
    this.d.tabs.badge("errors", "");
    this.d.tabs.badge("console", "");
  }

  /** The run on show is over (however it ended). */
  ended(): void {
    this.d.panes.errors.ended();
    this.d.ui.cancelBtn.disabled = true;
    document.body.classList.remove("running");
    this.d.tabs.runEnds();
    this.d.panes.scheduler.end();
    this.links.soon(); // an IR pane may have dropped its stale text: the bands follow
    this.showOffer();
  }

  /** An opt-in output the last run did not ask for, on show: it says so, what it is and
   * costs, and one click turns it on and runs again; the Checks tab with no check asked
   * for opens "What to compute" at the checks. */
  showOffer(): void {
    const { ui, store, panes } = this.d;
    const name = optInOutput(this.d.tabs.active);
    const request = this.d.runs().lastRequest;
    if (this.d.tabs.active === "checks" && request !== null && !(request.checks?.length ?? 0) && !panes.progress.isLive()) {
      const open = h("button", { type: "button", class: "primary", "data-testid": "choose-checks" }, "Choose checks…");
      open.addEventListener("click", () => openComputeAt(ui.compute, "check-nans"));
      ui.offer.replaceChildren(h("span", {}, "Checks are off: this run asked for none. "), open);
      ui.offer.hidden = false;
      return;
    }
    // before the page's first run of its own (a link's answer shown as it loaded), what
    // the next run will ask for decides
    const asked = request !== null ? (request.outputs?.includes(name!) ?? false) : (store.state.outputs ?? []).includes(name!);
    const refused = name === null ? null : outputRefusal(name, { gpuTarget: store.state.gpuTarget, tpuTopology: store.state.tpuTopology });
    if (name === null || asked || refused !== null || panes.progress.isLive()) {
      ui.offer.hidden = true;
      return;
    }
    const title = outputTitle(name);
    const o = OUTPUT_PANES[name].optIn;
    const button = h("button", { type: "button", class: "primary", "data-testid": `rerun-with-${name}` }, request === null ? "Turn it on and run" : "Turn it on and re-run");
    button.addEventListener("click", () => {
      store.state.outputs = [...(store.state.outputs ?? []).filter((o) => o !== name), name];
      for (const box of ui.outputBoxes) if (box.dataset.output === name) box.checked = true;
      store.changed();
      this.d.run();
    });
    ui.offer.replaceChildren(h("span", {}, h("strong", {}, `${title} is off`), ` — ${o?.help ?? ""} (${o?.cost ?? ""}). `), button);
    ui.offer.hidden = false;
  }

  private pipelineLabel(p: string): string | null {
    if (this.d.store.state.compare === null && p === "main") return null;
    return p === "main" ? "A" : "B";
  }

  /** An argument-count TypeError about the entry: say it is the args box, offer the fix. */
  private explainArgCount(message: string): void {
    const { store, follower, panes } = this.d;
    const entry = store.state.entry.trim() || "f";
    if (!message.includes(`${entry.split(".").pop()}()`)) return; // some other call inside f
    const sig = follower.signature();
    follower.blame();
    const said = `Python said: ${message.split("\n")[0]}`;
    if (!sig) {
      panes.errors.addArgsFix(`The \`args\` box (under the code, beside \`entry\`) holds the arguments \`${entry}\` is called with: a tuple, one value per parameter. ${said}`, null, () => {});
      return;
    }
    const n = sig.params.length;
    panes.errors.addArgsFix(
      `The \`args\` box (under the code) gives \`${store.state.args.trim() || "()"}\`, but \`${describeSignature(sig)}\` takes ${n} positional argument${n === 1 ? "" : "s"}. ${said}`,
      `Fill args from ${describeSignature(sig)} and run`,
      () => {
        follower.fill(sig);
        this.d.run();
      },
    );
  }

  /** What the run waits for before a worker takes it: the sandbox of a JAX version or
   * libraries no run of this page has used yet (the default one is started with the
   * server), with the time its first run took (measured: docs/frontend.md). */
  private sandboxWait(request: Pick<RunBody, "jax_version" | "libraries">): SandboxWait | null {
    if (this.warmSandboxes.has(this.sandboxKey)) return null;
    const libs = Object.entries(request.libraries ?? {}).map(([n, v]) => `${n} ${v}`);
    const what = [request.jax_version ? `JAX ${request.jax_version}` : "", ...libs].filter(Boolean).join(" with ");
    return { what: `the sandbox of ${what}`, expectedMs: SANDBOX_START_MS };
  }

  /** "cached, 3 min ago" and a button that sends the same request again, past the cache. */
  private cachedNote(ageS: number | null | undefined, at: string | null | undefined): HTMLElement {
    const fresh = h("button", { type: "button", class: "linklike", "data-testid": "rerun-fresh", title: "run it again now, not answered from the cache (\"cache\": false)" }, "re-run fresh");
    fresh.addEventListener("click", () => {
      void this.d.runs().fresh();
    });
    const age = ageS == null ? "cached" : `cached, ${fmtAgo(ageS)}`;
    return h(
      "span",
      { class: "cached-note", "data-testid": "cached", title: `outputs from the server's cache${at ? ` (made ${at})` : ""}: a pristine run (a fresh process that never ran anyone's code) showed the same as the first run; timings are measured fresh, profiles too` },
      age,
      " · ",
      fresh,
    );
  }
}
