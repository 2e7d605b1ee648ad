// The playground: wires the editor, the pipeline builders, the connection and the
// output panes together. Every output is rendered as text, never as HTML. The
// controllers live in app/: the tab bar (app/tabs.ts, one table in app/tabtable.ts),
// the run (app/run.ts, against the connection interface), rendering off the critical
// path (app/render.ts), panes loaded on first use (app/lazy.ts), the run shortcut
// (app/shortcuts.ts) and a shared link's results sent with the page (app/initial.ts).
import "./style.css";
import type { EditorView } from "@codemirror/view";
import { ArgsFollower } from "./args";
import { becomeEmbed, embedIdFromPath } from "./embed";
import { Connection, wsUrl } from "./connection";
import { readInitial } from "./app/initial";
import { LazyPane } from "./app/lazy";
import { PaneScheduler, type ScheduledPane } from "./app/render";
import { RunController, type RunView } from "./app/run";
import { installRunShortcut } from "./app/shortcuts";
import { TabController } from "./app/tabs";
import { ControlsController, fieldBindings } from "./app/controls";
import { LinkingController } from "./app/linking";
import { AcrossController } from "./app/across";
import { shareRequest } from "./app/share";
import { h } from "./dom";
import { createEditor, revealLine, setCode, setErrorMark } from "./editor";
import { DEFAULT_STATE, EXAMPLES, PRESETS } from "./examples";
import { buildLayout, type TabId } from "./layout";
import { firstLinkedLine, setBandLines, showHovered } from "./linking";
import { ConsolePane } from "./panes/console";
import { CostPane } from "./panes/cost";
import { ErrorsPane } from "./panes/errors";
import type { GraphPane } from "./panes/graph";
import { IrPane } from "./panes/ir";
import { Progress } from "./panes/progress";
import { TimingPane } from "./panes/timing";
import { AsmPane } from "./panes/asm";
import { MemoryPane } from "./panes/memory";
import type { PassesPane } from "./panes/passes";
import { RemarksPane } from "./panes/remarks";
import type { ShardingPane } from "./panes/sharding";
import { MeshBuilder } from "./meshbuilder";
import { pmapAsShardMap } from "./pmap";
import { entrySignature } from "./signature";
import { ValuePane } from "./panes/value";
import { fmtAgo } from "./format";
import { PMAP_TO_SHARD_MAP, PipelineBuilder } from "./pipeline";
import { Backends, IR_TYPES, isTampered, pipelineOf, type IrType, type RunEvent } from "./protocol";
import { embeddedSnippet, fromRequest, loadAutosave, saveAutosave, snippetIdFromPath, toRequest, type PlayState } from "./state";
import { Backend, Output, type RunBody } from "./generated/request";
import { parsedOrNull } from "./narrow";
import { OUTPUT_PANES, optInOutput } from "./panes/registry";
import { outputRefusal, type Targets } from "./targets";
import { describePipeline, type StepProblem } from "./transforms";
import { describeSignature, isArgCountError } from "./signature";

const ui = buildLayout(document.getElementById("app")!);
const embedId = embedIdFromPath(location.pathname);
let state: PlayState = structuredClone(DEFAULT_STATE);

// --- theme -------------------------------------------------------------------------
const THEME_KEY = "jaxplay:theme";
function applyTheme(theme: string): void {
  document.documentElement.dataset.theme = theme;
  ui.themeBtn.setAttribute("aria-label", theme === "dark" ? "Switch to the light theme" : "Switch to the dark theme");
}
applyTheme(localStorage.getItem(THEME_KEY) ?? (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
ui.themeBtn.addEventListener("click", () => {
  const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  applyTheme(next);
  localStorage.setItem(THEME_KEY, next);
});

// --- linking: hover a line on one side, its partners light up on the other ---------
const tabs = new TabController(ui);
const irPanes = {} as Record<IrType, IrPane>;

function activeIr(): IrPane | null {
  return (IR_TYPES as readonly string[]).includes(tabs.active) ? irPanes[tabs.active as IrType] : null;
}

const linking = new LinkingController(
  {
    editor: () => editor,
    outputs: () => (tabs.active === "passes" ? (passesLazy.get()?.views() ?? []) : (activeIr()?.views() ?? [])),
    graph: () => graphLazy.get(),
    pinned: (line) => {
      ui.pinNote.hidden = line === null;
      ui.pinNote.textContent = line === null ? "" : `📌 line ${line} pinned (click to unpin)`;
      if (line === null) delete document.body.dataset.pinned;
      else document.body.dataset.pinned = String(line);
    },
  },
  { show: showHovered, first: firstLinkedLine },
);
const hover = (codeLine: number | null, from: EditorView | null): void => linking.hover(codeLine, from);
const pin = (codeLine: number): void => linking.pin(codeLine);
ui.pinNote.addEventListener("click", () => linking.pinned !== null && pin(linking.pinned));

function refreshBands(): void {
  // the Graph tab bands the code lines of the text it draws
  const pane = tabs.active === "graph" ? irPanes[graphLazy.get()?.source ?? "jaxpr"] : activeIr();
  editor.dispatch({ effects: setBandLines.of(pane?.codeLines() ?? new Set()) });
}

ui.bands.addEventListener("change", () => document.body.classList.toggle("no-bands", !ui.bands.checked));

// --- the editor and the call ---------------------------------------------------------
let saveTimer = 0;
function changed(): void {
  window.clearTimeout(saveTimer);
  if (embedId !== null) return; // the embed view never touches the reader's own autosave
  saveTimer = window.setTimeout(() => saveAutosave(state), 300);
}

const follower = new ArgsFollower(ui.args, ui.argsNote, () => state, changed);

const editor = createEditor(ui.editorHolder, state.code, {
  onChange: (code) => {
    state.code = code;
    follower.soon();
    meshSoon();
    changed();
  },
  onRun: () => void run(),
  onHover: hover,
  onPin: pin,
});


const builderA = new PipelineBuilder(ui.pipeA, "A", (steps) => ((state.steps = steps), changed()), () => state.entry || "f");
const builderB = new PipelineBuilder(ui.pipeB, "B", (steps) => ((state.compare = steps), changed()), () => state.entry || "f");
ui.pipeA.prepend(h("h2", { class: "pipeline-title" }, "Pipeline ", h("span", { class: "pipe-a compare-only" }, "A")));
ui.pipeB.prepend(h("h2", { class: "pipeline-title" }, "Pipeline ", h("span", { class: "pipe-b" }, "B")));

// --- the mesh builder and pmap's shard_map form --------------------------------------------
const meshBuilder = new MeshBuilder(
  ui.meshHolder,
  () => ({ code: state.code, entry: state.entry || "f", devices: state.devices }),
  (sharding) => ((state.sharding = sharding), changed()),
  (topology) => pickTargets({ gpuTarget: topology ? "" : state.gpuTarget, tpuTopology: topology }),
);
let meshTimer = 0;
/** The argument boxes follow the entry's parameters, a moment after typing stops. */
function meshSoon(): void {
  window.clearTimeout(meshTimer);
  meshTimer = window.setTimeout(() => meshBuilder.refresh(), 400);
}
ui.pipeA.addEventListener(PMAP_TO_SHARD_MAP, (e) => {
  const index = (e as CustomEvent<number>).detail;
  const step = state.steps[index];
  if (!step) return;
  const nargs = entrySignature(state.code, state.entry || "f")?.params.length ?? 1;
  const form = pmapAsShardMap(step, nargs, state.devices);
  state.steps = [...state.steps.slice(0, index), ...form.steps, ...state.steps.slice(index + 1)];
  state.sharding = { mesh: form.mesh, inShardings: [], outShardings: "" };
  builderA.set(state.steps);
  meshBuilder.set(state.sharding);
  (ui.meshHolder as HTMLDetailsElement).open = true;
  changed();
  toast(`pmap is now its shard_map form: ${form.note}.`);
});

function setCompare(on: boolean, steps?: PlayState["compare"]): void {
  state.compare = on ? (steps ?? state.compare ?? structuredClone(state.steps)) : null;
  ui.compareBtn.setAttribute("aria-pressed", String(on));
  ui.pipeB.hidden = !on;
  document.body.classList.toggle("comparing", on);
  if (on) builderB.set(state.compare!);
}
ui.compareBtn.addEventListener("click", () => {
  setCompare(state.compare === null);
  changed();
});

// --- across versions: Run runs the request on the ticked versions (POST /api/v1/across) ---
const across = new AcrossController({
  load: async () => {
    const [pane, mod] = await Promise.all([import("./panes/across"), import("./across")]);
    return { view: new pane.AcrossView(ui.acrossHolder, (versions) => ((state.acrossVersions = versions), changed())), mod };
  },
  ticked: () => state.acrossVersions,
  onMode: (on) => {
    ui.acrossBtn.setAttribute("aria-pressed", String(on));
    ui.acrossHolder.hidden = !on;
    document.body.classList.toggle("across-mode", on);
  },
  onBusy: (busy) => {
    ui.cancelBtn.disabled = !busy;
    document.body.classList.toggle("running", busy);
  },
});
function setAcross(on: boolean): void {
  across.setMode(on);
}
ui.acrossBtn.addEventListener("click", () => setAcross(!across.on));

// --- backend, devices, config ---------------------------------------------------------

// --- compile for hardware the server does not have (targets.ts) -------------------------
ui.gpuTarget.addEventListener("change", () => {
  const gpu = ui.gpuTarget.value;
  pickTargets({ gpuTarget: gpu, tpuTopology: gpu ? "" : state.tpuTopology });
});

/** One target at a time: picking a GPU clears the TPU topology and the other way round. */
function pickTargets(t: Targets): void {
  state.gpuTarget = t.gpuTarget ?? "";
  state.tpuTopology = t.tpuTopology ?? "";
  showTargets();
  changed();
}

let offeredGpuTargets: string[] = [];

/** The targets in their controls, and why outputs are not asked for with them: each
 * opt-in box the target refuses is disabled with its reason, so are the tabs of the
 * outputs it cannot give, and the XLA outputs box says it in words. */
function showTargets(): void {
  const gpu = state.gpuTarget ?? "";
  // one from a link that this server does not offer stays listed: the run says so (422)
  const names = gpu && !offeredGpuTargets.includes(gpu) ? [...offeredGpuTargets, gpu] : offeredGpuTargets;
  const label = (n: string): string => (offeredGpuTargets.includes(n) ? `GPU ${n} (no GPU needed)` : `GPU ${n} (not offered here)`);
  ui.gpuTarget.replaceChildren(h("option", { value: "" }, "this worker"), ...names.map((n) => h("option", { value: n }, label(n))));
  ui.gpuTarget.value = gpu;
  ui.gpuTargetLabel.hidden = names.length === 0;
  meshBuilder.setTopology(state.tpuTopology ?? "");
  const targets: Targets = { gpuTarget: gpu, tpuTopology: state.tpuTopology };
  const refused: string[] = [];
  for (const box of ui.outputBoxes) {
    const name = optInOutput(box.dataset.output);
    const why = name === null ? null : outputRefusal(name, targets);
    box.disabled = why !== null;
    box.parentElement?.classList.toggle("refused", why !== null);
    if (why !== null) box.parentElement?.setAttribute("title", why);
    else if (name !== null) box.parentElement?.setAttribute("title", OUTPUT_PANES[name].optIn?.help ?? "");
    if (why !== null && name !== null) refused.push(name);
  }
  for (const name of Output.options) {
    const why = outputRefusal(name, targets);
    const tab = ui.tabs[OUTPUT_PANES[name].tab];
    tab.classList.toggle("refused", why !== null);
    if (why !== null) tab.title = why;
    else tab.removeAttribute("title");
    // its pane says why instead of waiting for an output that will not come (style.css)
    const panel = ui.panels[OUTPUT_PANES[name].tab];
    if (why !== null) panel.dataset.refused = why;
    else delete panel.dataset.refused;
    if (why !== null && OUTPUT_PANES[name].optIn === undefined) refused.push(name);
  }
  const what = gpu ? `GPU ${gpu}` : state.tpuTopology ? `TPU ${state.tpuTopology}` : "";
  ui.targetNote.textContent = what && refused.length ? `compiling for ${what} (without it): no ${refused.join(", ")}, nothing runs` : "";
}
// the plain fields, one binding each (app/controls.ts)
const controls = new ControlsController(
  fieldBindings(ui, {
    entry: () => {
      follower.soon();
      meshSoon();
      builderA.refreshSummary();
      builderB.refreshSummary();
    },
    devices: () => meshBuilder.refresh(),
  }),
  () => state,
  changed,
);

async function loadBackends(): Promise<void> {
  try {
    const r = await fetch("/api/v1/backends");
    const parsed = Backends.safeParse(await r.json());
    if (!parsed.success) return;
    for (const b of parsed.data.backends) {
      // a name outside the request's Backend enum could only be refused (422): not offered
      if (b.name === "auto" || parsedOrNull(Backend, b.name) === null || [...ui.backend.options].some((o) => o.value === b.name)) continue;
      const what = [b.device_kind, b.jax_version ? `jax ${b.jax_version}` : ""].filter(Boolean).join(", ");
      ui.backend.append(h("option", { value: b.name }, what ? `${b.name} (${what})` : b.name));
    }
    ui.backend.value = state.backend;
    if (ui.backend.value !== state.backend) ui.backend.value = "auto";
    offeredGpuTargets = parsed.data.gpu_targets ?? [];
    meshBuilder.setTopologies(parsed.data.tpu_topologies ?? []);
    showTargets();
    const versions = parsed.data.backends.find((b) => b.versions?.length)?.versions ?? [];
    showVersions(versions);
    across.setVersions(versions);
    document.body.dataset.backends = "loaded"; // what the server offers is on show (tests wait for it)
  } catch {
    // the run itself will say if the server is unreachable
  }
}

/** The JAX version picker: the server's versions, newest first; one not installed is
 * listed but disabled (an operator adds it), and the default is marked. */
function showVersions(versions: { version: string; installed: boolean; default: boolean }[]): void {
  if (versions.length === 0) return; // a server that names none: "default" alone
  const options = versions
    .slice()
    .reverse()
    .map((v) => {
      const label = v.default ? `${v.version} (default)` : v.installed ? v.version : `${v.version} (not installed)`;
      // the default is sent as no jax_version at all: a link then follows the default
      const option = h("option", { value: v.default ? "" : v.version }, label);
      option.disabled = !v.installed;
      return option;
    });
  ui.jaxVersion.replaceChildren(...options);
  pickVersion(state.jaxVersion ?? "");
}

/** Selects `version` in the picker, adding it when this server does not list it (a link
 * made elsewhere): the run then says it is not installed here, and "default" is offered. */
function pickVersion(version: string): void {
  if (version && ![...ui.jaxVersion.options].some((o) => o.value === version)) {
    ui.jaxVersion.append(h("option", { value: version }, `${version} (from the link)`));
  }
  ui.jaxVersion.value = version;
}

/** Puts `s` into every control. */
function show(s: PlayState): void {
  state = structuredClone(s);
  setCode(editor, state.code);
  controls.show(state);
  follower.adopt();
  builderA.set(state.steps);
  setCompare(state.compare !== null, state.compare);
  if (![...ui.backend.options].some((o) => o.value === state.backend)) {
    ui.backend.append(h("option", { value: state.backend }, state.backend));
  }
  ui.backend.value = state.backend;
  pickVersion(state.jaxVersion ?? "");
  meshBuilder.set(state.sharding);
  if (state.sharding?.mesh) (ui.meshHolder as HTMLDetailsElement).open = true;
  showTargets();
  builderA.refreshSummary();
  changed();
}

ui.examples.addEventListener("change", () => {
  const ex = EXAMPLES.find((e) => e.id === ui.examples.value);
  ui.examples.value = "";
  if (!ex) return;
  show({ ...structuredClone(ex.state), backend: state.backend });
  editor.dispatch({ effects: setErrorMark.of(null) });
  void run();
});

ui.presets.addEventListener("change", () => {
  const preset = PRESETS.find((p) => p.id === ui.presets.value);
  ui.presets.value = "";
  if (!preset) return;
  const ex = preset.example ? EXAMPLES.find((e) => e.id === preset.example) : undefined;
  if (ex) show({ ...structuredClone(ex.state), backend: state.backend });
  else {
    state.steps = structuredClone(preset.steps);
    builderA.set(state.steps);
    setCompare(preset.compare !== null, structuredClone(preset.compare));
    changed();
  }
  void run();
});

// --- tabs ------------------------------------------------------------------------------
tabs.onSelect((id) => {
  scheduler.flushTab(id); // the pane now shown renders what it held back
  if (id === "graph") void graphLazy.ready().then((g) => (g.setVisible(tabs.active === "graph"), refreshBands(), linking.refresh()));
  else graphLazy.get()?.setVisible(false);
  refreshBands();
  for (const view of activeIr()?.views() ?? []) view.requestMeasure();
  linking.refresh(); // the pane now shown gets the hovered and pinned lines
  showOffer();
});

function selectTab(id: TabId): void {
  tabs.select(id);
}

function mark(tab: TabId, badge?: string): void {
  tabs.mark(tab, badge);
}

// --- panes ------------------------------------------------------------------------------
for (const kind of IR_TYPES) irPanes[kind] = new IrPane(kind, ui.panels[kind], hover, pin);
// the Graph (elkjs layout) and Sharding panes are loaded when their tab is first shown
const graphLazy = new LazyPane<GraphPane>(["jaxpr", "hlo"], async () => {
  const { GraphPane } = await import("./panes/graph");
  return new GraphPane(ui.panels.graph, (line) => hover(line, null), pin, () => refreshBands());
});
const shardingLazy = new LazyPane<ShardingPane>(["sharding"], async () => {
  const { ShardingPane } = await import("./panes/sharding");
  return new ShardingPane(ui.panels.sharding, (line) => revealLine(editor, line), () => entrySignature(state.code, state.entry || "f")?.params.map((p) => p.name) ?? []);
});
const valuePane = new ValuePane(ui.panels.value);
const costPane = new CostPane(ui.panels.cost);
const timingPane = new TimingPane(ui.panels.timing);
const consolePane = new ConsolePane(ui.panels.console);
const errorsPane = new ErrorsPane(ui.panels.errors, (line) => revealLine(editor, line));
// Passes (its before/after diff: @codemirror/merge) is loaded when first shown
const passesLazy = new LazyPane<PassesPane>(["passes"], async () => {
  const { PassesPane } = await import("./panes/passes");
  return new PassesPane(ui.panels.passes, hover, pin);
});
const asmPane = new AsmPane(ui.panels.asm, (line) => hover(line, null));
const memoryPane = new MemoryPane(ui.panels.memory, (line) => hover(line, null));
const remarksPane = new RemarksPane(ui.panels.remarks, (line) => revealLine(editor, line));
const progress = new Progress(ui.progress);
/** Every output pane with its tab; events go to the panes that consume them. */
const outputPanes: ScheduledPane[] = [
  ...IR_TYPES.map((k): ScheduledPane => ({ tab: k, pane: irPanes[k] })),
  { tab: "graph", pane: graphLazy, lazy: true },
  { tab: "value", pane: valuePane },
  { tab: "cost", pane: costPane },
  { tab: "timing", pane: timingPane },
  { tab: "passes", pane: passesLazy, lazy: true },
  { tab: "asm", pane: asmPane },
  { tab: "memory", pane: memoryPane },
  { tab: "remarks", pane: remarksPane },
  { tab: "sharding", pane: shardingLazy, lazy: true },
  { tab: "console", pane: consolePane },
];
const scheduler = new PaneScheduler(outputPanes, () => tabs.active, undefined, (entry) => mark(entry.tab, entry.pane.badge?.()));

// --- an opt-in output not asked for: one click runs again with it -------------------------
function showOffer(): void {
  const name = optInOutput(tabs.active);
  const request = runs.lastRequest;
  const asked = request?.outputs?.includes(name!) ?? false;
  const refused = name === null ? null : outputRefusal(name, { gpuTarget: state.gpuTarget, tpuTopology: state.tpuTopology });
  if (name === null || request === null || asked || refused !== null || progress.isLive()) {
    ui.offer.hidden = true;
    return;
  }
  const label = OUTPUT_PANES[name].optIn?.label ?? name;
  const button = h("button", { type: "button", class: "primary", "data-testid": `rerun-with-${name}` }, `Run again with ${label}`);
  button.addEventListener("click", () => {
    state.outputs = [...(state.outputs ?? []).filter((o) => o !== name), name];
    for (const box of ui.outputBoxes) if (box.dataset.output === name) box.checked = true;
    changed();
    void run();
  });
  ui.offer.replaceChildren(h("span", {}, `This run did not ask for ${label} (${OUTPUT_PANES[name].optIn?.help ?? ""}). `), button);
  ui.offer.hidden = false;
}

// --- running ----------------------------------------------------------------------------
let labels: Record<string, string> = {};

const conn = new Connection(wsUrl(location), {
  onEvent: (_seq, event) => onEvent(event),
  onProblem: (seq, message, status, field) => {
    const title = status === 422 ? "The server refused the request" : status === 429 || status === 503 ? "The server is busy" : "Server problem";
    errorsPane.addProblem(title, field ? `${message} (field: ${field})` : message);
    mark("errors", String(errorsPane.size()));
    if (seq !== -1) {
      progress.problem(status ? `(${status})` : "");
      runEnded();
      selectTab("errors");
    }
  },
  onDropped: (_seq, why) => {
    progress.problem(`— ${why}`);
    errorsPane.addProblem("Connection lost", why);
    runEnded();
  },
});

/** What a run does to the page: app/run.ts drives it. */
const runView: RunView = {
  start: (request, keep) => startRun(request, keep),
  event: (event) => onEvent(event),
  unreachable: (message) => {
    progress.problem(`— ${message}`);
    errorsPane.addProblem("Cannot reach the server", message);
    mark("errors", String(errorsPane.size()));
    runEnded();
  },
};
const runs = new RunController(conn, runView);
selectTab("jaxpr");

function runEnded(): void {
  ui.cancelBtn.disabled = true;
  document.body.classList.remove("running");
  scheduler.end();
  showOffer();
}

function pipelineLabel(p: string): string | null {
  if (state.compare === null && p === "main") return null;
  return p === "main" ? "A" : "B";
}

function onEvent(event: RunEvent): void {
  const p = pipelineOf(event);
  for (const entry of scheduler.consumers(event.type)) {
    scheduler.show(entry, event, p);
    mark(entry.tab, scheduler.holds(entry.pane) ? undefined : entry.pane.badge?.());
    tabs.outputArrived(entry.tab);
  }
  switch (event.type) {
    case "accepted": {
      const w = event.worker;
      if (w) progress.setWorker([w.backend ?? w.platform, w.device_kind, w.devices ? `${w.devices} device${w.devices === 1 ? "" : "s"}` : "", w.jax_version ? `jax ${w.jax_version}` : ""].filter(Boolean).join(" · "));
      if (event.cached === true) progress.setNote(cachedNote(event.age_s, event.cached_at));
      progress.started();
      break;
    }
    case "stage":
      progress.stage(p, event.stage, event.ms ?? null);
      break;
    case "jaxpr":
    case "stablehlo":
    case "hlo":
      // the code lines banded and linked follow the text on show
      if (tabs.active === event.type || tabs.active === "graph") {
        refreshBands();
        linking.refresh();
      }
      break;
    case "error": {
      errorsPane.addRunError(event, pipelineLabel(p));
      if (isArgCountError(event.kind, event.message)) explainArgCount(event.message);
      mark("errors", String(errorsPane.size()));
      progress.failed(p, event.stage);
      if (event.line != null && event.line > 0) {
        editor.dispatch({ effects: setErrorMark.of({ line: event.line, kind: event.kind, hint: event.hint ?? "" }) });
      }
      const pane = activeIr();
      if (!pane || !pane.has(p)) selectTab("errors");
      break;
    }
    case "done": {
      const status: string = event.status;
      progress.done(status, event.ms, event.reason);
      if (isTampered(status)) {
        ui.banner.textContent = "⚠ this run's code wrote to jaxplay's output channel; what it shows may be forged";
        ui.banner.hidden = false;
      }
      runEnded();
      // a run that failed with no error event (its worker died, its time ran out): the
      // reason `done` gives is all there is, said in Errors like any other failure
      if (status !== "ok" && status !== "cancelled" && !isTampered(status) && errorsPane.size() === 0) {
        errorsPane.addProblem(DONE_TITLES[status] ?? "The run ended with an error", event.reason || "The server gave no reason.");
        mark("errors", String(errorsPane.size()));
        const pane = activeIr();
        if (!pane || !pane.has(p)) selectTab("errors");
      }
      if (errorsPane.size() === 0) tabs.runEndedClean();
      break;
    }
  }
}

/** The Errors card's title for a run that ended badly without an error event. */
const DONE_TITLES: Record<string, string | undefined> = {
  error: "The run ended with an error",
  timeout: "The run took too long",
  killed: "The run was stopped",
};

/** An argument-count TypeError about the entry: say it is the args box, offer the fix. */
function explainArgCount(message: string): void {
  const entry = state.entry.trim() || "f";
  if (!message.includes(`${entry.split(".").pop()}()`)) return; // some other call inside f
  const sig = follower.signature();
  follower.blame();
  const said = `Python said: ${message.split("\n")[0]}`;
  if (!sig) {
    errorsPane.addArgsFix(`The \`args\` box (under the code, beside \`entry\`) holds the arguments \`${entry}\` is called with: a tuple, one value per parameter. ${said}`, null, () => {});
    return;
  }
  const n = sig.params.length;
  errorsPane.addArgsFix(
    `The \`args\` box (under the code) gives \`${state.args.trim() || "()"}\`, but \`${describeSignature(sig)}\` takes ${n} positional argument${n === 1 ? "" : "s"}. ${said}`,
    `Fill args from ${describeSignature(sig)} and run`,
    () => {
      follower.fill(sig);
      void run();
    },
  );
}

/** "cached, 3 min ago" and a button that sends the same request again, past the cache. */
function cachedNote(ageS: number | null | undefined, at: string | null | undefined): HTMLElement {
  const fresh = h("button", { type: "button", class: "linklike", "data-testid": "rerun-fresh", title: "run it again now, not answered from the cache (\"cache\": false)" }, "re-run fresh");
  fresh.addEventListener("click", () => {
    void runs.fresh();
  });
  const age = ageS == null ? "cached" : `cached, ${fmtAgo(ageS)}`;
  return h(
    "span",
    { class: "cached-note", "data-testid": "cached", title: `outputs from the server's cache${at ? ` (made ${at})` : ""}: two runs by different clients agreed on them; timings are measured fresh` },
    age,
    " · ",
    fresh,
  );
}

async function run(): Promise<void> {
  follower.follow();
  const problems: StepProblem[] = [];
  const request = toRequest(state, problems);
  if (problems.length > 0) {
    errorsPane.reset();
    mark("console", "");
    const title = (pr: StepProblem): string => (pr.step >= 0 ? "A transform option does not parse" : pr.option === "compile for" ? "The run does not go with what it compiles for" : "The mesh or a PartitionSpec does not parse");
    for (const pr of problems) errorsPane.addProblem(title(pr), pr.step < 0 ? `${pr.option}: ${pr.message}` : `step ${pr.step + 1}, ${pr.option}: ${pr.message}`);
    mark("errors", String(problems.length));
    progress.problem("— fix the transform options first");
    selectTab("errors");
    setAcross(false); // the problems are shown in the outputs
    return;
  }
  if (across.on) {
    errorsPane.reset();
    mark("errors", "");
    mark("console", "");
    void across.run(request);
    return;
  }
  labels = { main: describePipeline(state.steps, request.entry) };
  if (state.compare) labels["0"] = describePipeline(state.compare, request.entry);
  await runs.send(request);
}

/** A run starts (sent, or painted from the page): the outputs are cleared for it, unless
 * it follows a painted run (`keep`): its outputs then replace the painted ones. */
function startRun(request: RunBody, keep = false): void {
  ui.cancelBtn.disabled = false;
  document.body.classList.add("running");
  if (keep) return;
  errorsPane.reset();
  mark("errors", "");
  mark("console", "");
  ui.banner.hidden = true;
  ui.offer.hidden = true;
  const pipelines = ["main", ...(request.compare ?? []).map((_, i) => String(i))];
  scheduler.reset(pipelines, labels);
  progress.reset(pipelines, labels);
  progress.setWorker("");
  editor.dispatch({ effects: setErrorMark.of(null) });
  refreshBands();
  tabs.runStarts();
}

ui.runBtn.addEventListener("click", () => void run());
ui.cancelBtn.addEventListener("click", () => {
  if (across.cancel()) return;
  // the server answers a cancel with the run's `done` (cancelled)
  if (runs.cancel()) return;
  progress.done("cancelled", null, "before it started");
  runEnded();
});
installRunShortcut(document, () => void run());

// --- share -------------------------------------------------------------------------------
let toastTimer = 0;
function toast(...content: (Node | string)[]): void {
  ui.toast.replaceChildren(...content);
  ui.toast.hidden = false;
  window.clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (ui.toast.hidden = true), 8000);
}

ui.shareBtn.addEventListener("click", async () => {
  const problems: StepProblem[] = [];
  const request = toRequest(state, problems);
  if (problems.length) {
    toast("Fix the transform options before sharing.");
    return;
  }
  const shared = await shareRequest(request, {
    origin: location.origin,
    setPath: (path) => history.replaceState(null, "", path),
    copy: (text) => navigator.clipboard.writeText(text),
  });
  if ("problem" in shared) {
    toast(shared.problem);
    return;
  }
  const field = h("input", { class: "mono share-link", readonly: true, value: shared.url.href, "aria-label": "Link to this snippet", "data-testid": "share-link" });
  toast(shared.copied ? "Link copied: " : "Link: ", field);
  field.select();
});

// For scripts and tests: the full texts (CodeMirror renders only what is on screen).
Object.assign(window, {
  jaxplay: {
    text: (kind: IrType, pipeline = "main") => {
      scheduler.flushTab(kind); // a pane not on show may hold its text back
      return irPanes[kind]?.text(pipeline) ?? null;
    },
    graphNodes: () => graphLazy.get()?.nodeCount() ?? 0,
    /** runs sent on the WebSocket, and runs started (sent or painted from the page) */
    runsSent: () => conn.sent,
    runsStarted: () => runs.started,
    code: () => editor.state.doc.toString(),
  },
});

// --- start ---------------------------------------------------------------------------------
async function start(): Promise<void> {
  conn.keep(); // the WebSocket opens now: the first run pays no handshake
  // a shared link whose results the server sent with the page (app/initial.ts)
  const initial = readInitial(document);
  let snippet = embeddedSnippet(document) ?? initial?.request ?? null;
  const id = snippetIdFromPath(location.pathname) ?? embedId;
  if (!snippet && id) {
    try {
      const r = await fetch(`/api/v1/snippets/${encodeURIComponent(id)}`);
      if (r.ok) snippet = await r.json();
    } catch {
      // shown as the default state
    }
  }
  if (snippet) {
    show(fromRequest(snippet, DEFAULT_STATE));
    if (embedId !== null) becomeEmbed(embedId, ui, editor, () => describePipeline(state.steps, state.entry || "f"));
    if (initial) {
      // painted at once, as a run's events; later runs are live as usual
      const request = toRequest(state, []);
      labels = { main: describePipeline(state.steps, request.entry) };
      if (state.compare) labels["0"] = describePipeline(state.compare, request.entry);
      runs.paint(request, initial.events);
      // outputs no cache keeps (timing): the run as usual brings them
      if (initial.pending.length > 0) void runs.follow(request);
    }
    void loadBackends();
    if (!initial) void run(); // a shared link shows its results at once (from the cache when it has them)
    return;
  }
  show(loadAutosave(DEFAULT_STATE) ?? DEFAULT_STATE);
  void loadBackends();
}
void start();
