// The playground's composition root (loaded by boot.ts, the entry, which has opened the
// WebSocket: connection/socket.ts): builds the page (app/layout.ts) and wires the controllers of
// app/ together; each does one job and is unit-tested on its own:
//   store     the state, shown in every control, saved to the autosave
//   controls  the plain fields <-> the state          pipelines  pipelines A/B, mesh
//   targets   compile targets and what they refuse    backends   what the server offers
//   tabs      the tab bar (one table: tabtable)       panes      the output panes
//   linking   hover and pin code <-> output lines     render     the pane on show first
//   run       a run over the connection interface     outputs    what a run does to the page
//   runner    Run: the state made a request           across     across versions
//   share     the Share button                        start      a link, or the autosave
// Every output is rendered as text, never as HTML.
import type { EditorView } from "@codemirror/view";
import { ArgsFollower } from "./controls/args";
import { becomeEmbed, embedIdFromPath } from "./app/embed";
import { createEditor, revealLine, setCode, setErrorMark } from "./editor/editor";
import { DEFAULT_STATE } from "./model/examples";
import { buildLayout } from "./app/layout";
import { firstLinkedLine, setBandLines, showHovered } from "./editor/linking";
import type { IrType } from "./connection/protocol";
import { entrySignature } from "./model/signature";
import { saveAutosave, toRequest } from "./model/state";
import { describePipeline, type StepProblem } from "./model/transforms";
import { AcrossController } from "./app/across-controller";
import { BackendsController } from "./app/backends";
import { LibrariesPopover } from "./controls/libraries-popover";
import { checksBindings } from "./app/checks-bindings";
import { ControlsController, fieldBindings } from "./app/bindings";
import { LinkingController } from "./app/linking-controller";
import { installMenus } from "./app/menus";
import { OutputsController } from "./app/outputs";
import { Panes } from "./app/panes";
import { PipelinesController } from "./app/pipelines";
import { AfterPaint } from "./panes/render";
import { conn, release, route, takeEarly } from "./connection/socket";
import { RunController } from "./app/run";
import { Runner } from "./app/runner";
import { installShareButton } from "./app/share";
import { installNotebookImport } from "./app/notebook-import";
import { installReportButton } from "./app/report";
import { installRunShortcut } from "./app/shortcuts";
import { startPage } from "./app/start";
import { PlayStore } from "./app/store";
import { TabController } from "./app/tabs";
import { hashFor, tabFromHash } from "./model/tabtable";
import { TargetsController } from "./app/targets-controller";
import { installTheme } from "./app/theme";
import { Toast } from "./app/toast";
import { initialLang, setLang } from "./i18n";
import { installLanguage } from "./app/page-words";
import { installTour } from "./tour/entry";
import { touring } from "./tour/shared";

const ui = buildLayout(document.getElementById("app")!);
const embedId = embedIdFromPath(location.pathname);
// the embed view never touches the reader's own autosave
// (never while a tour is open: the reader's own code stays in the autosave)
const store = new PlayStore(DEFAULT_STATE, embedId === null ? (s) => void (touring() || saveAutosave(s)) : null);
const changed = (): void => store.changed();
const run = (): void => void runner.run();
installTheme(ui.themeBtn);
const toast = new Toast(ui.toast);

// --- tabs, output panes, linking ------------------------------------------------------
const tabs = new TabController(ui);
const linking = new LinkingController(
  {
    editor: () => editor,
    outputs: () => panes.linkedViews(),
    graph: () => panes.graph.get(),
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
ui.bands.addEventListener("change", () => document.body.classList.toggle("no-bands", !ui.bands.checked));
/** The code lines of the IR text on show are banded in the editor. */
const refreshBands = (): void => editor.dispatch({ effects: setBandLines.of(panes.bandLines()) });
const bandsSoon = new AfterPaint(refreshBands);

// --- the editor, the call row, the pipelines, the targets ------------------------------
// the entry follows the code too (the function under the cursor, else the last one)
const follower = new ArgsFollower(ui.args, ui.argsNote, () => store.state, changed, {
  box: ui.entry,
  cursor: () => editor.state.selection.main.head,
  changed: () => {
    pipelines.meshSoon();
    pipelines.refreshSummaries();
  },
});
const editor = createEditor(ui.editorHolder, store.state.code, {
  onChange: (code) => {
    store.state.code = code;
    follower.soon();
    pipelines.meshSoon();
    changed();
  },
  onRun: run,
  onHover: hover,
  onPin: pin,
  jaxVersion: () => store.state.jaxVersion,
});
const pipelines = new PipelinesController(ui, store, { pickTargets: (t) => targets.pick(t), toast: (m) => toast.show(m) });
const across = new AcrossController({
  load: async () => {
    const [pane, mod] = await Promise.all([import("./panes/across"), import("./model/across-versions")]);
    return { view: new pane.AcrossView(ui.acrossHolder, (versions) => ((store.state.acrossVersions = versions), changed())), mod };
  },
  ticked: () => store.state.acrossVersions,
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
ui.acrossBtn.addEventListener("click", () => across.setMode(!across.on));
const targets = new TargetsController(ui, store, (topology) => pipelines.mesh.setTopology(topology));
const controls = new ControlsController(
  fieldBindings(ui, {
    entry: () => {
      follower.soon();
      pipelines.meshSoon();
      pipelines.refreshSummaries();
    },
    devices: () => pipelines.mesh.refresh(),
  }).concat(checksBindings(ui.checks)),
  () => store.state,
  changed,
);
const libraries = new LibrariesPopover(ui.jaxVersion, {
  code: () => editor.state.doc.toString(),
  insert: (at, text) => editor.dispatch({ changes: { from: at, insert: text } }),
  chosen: () => store.state.libraries ?? {},
  choose: (chosen) => ((store.state.libraries = chosen), changed()),
});
const backends = new BackendsController(ui, store, {
  targets: (gpu, tpu) => {
    targets.offered = gpu;
    pipelines.mesh.setTopologies(tpu);
    targets.show();
  },
  versions: (versions) => (across.setVersions(versions), libraries.setVersions(versions)),
});
// a state shown (a snippet, an example, the autosave) goes into every control, in order
store.onShow((s) => setCode(editor, s.code));
store.onShow((s) => controls.show(s));
store.onShow(() => follower.adopt());
store.onShow((s) => pipelines.showSteps(s));
store.onShow((s) => backends.show(s));
store.onShow((s) => pipelines.showMesh(s));
store.onShow(() => targets.show());
store.onShow(() => libraries.refresh());
store.onShow(() => pipelines.a.refreshSummary());
installMenus(ui, store, pipelines, { clearErrorMark: () => editor.dispatch({ effects: setErrorMark.of(null) }), run });

// --- the panes and the run -------------------------------------------------------------
const panes = new Panes(ui.panels, ui.progress, {
  hover,
  pin,
  reveal: (line) => revealLine(editor, line),
  drawn: () => refreshBands(),
  params: () => entrySignature(store.state.code, store.state.entry || "f")?.params.map((p) => p.name) ?? [],
  active: () => tabs.active,
  // a pane rendered what it held back: its badge follows; no dot (the dot is for a tab
  // that got output, marked when the output came: a pane drawing its empty state after
  // a run that sent it nothing is not new output)
  rendered: (entry) => {
    const badge = entry.pane.badge?.();
    if (badge !== undefined) tabs.badge(entry.tab, badge);
    // a pane loaded late (or a big text drawn in a task of its own) links its lines
    // now: after the next paint, not in the task that drew it
    if (entry.tab === tabs.active) bandsSoon.soon();
  },
  // asked for from the cost pane: kept in the state (and a link), the program run again
  costBefore: {
    on: () => store.state.costBefore === true,
    set: (on) => {
      store.state.costBefore = on;
      store.changed();
      if (on) run();
    },
  },
  // the Value pane's pages: one run with value_from, the state's other fields as they are
  valueFrom: (first) => {
    store.state.valueFrom = first;
    try {
      run(); // the request is made before the run's first wait
    } finally {
      store.state.valueFrom = undefined;
    }
  },
});
tabs.onSelect((id) => {
  panes.scheduler.flushTab(id); // the pane now shown renders what it held back
  if (id === "graph") void panes.graph.ready().then((g) => (g.setVisible(tabs.active === "graph"), refreshBands(), linking.refresh()));
  else panes.graph.get()?.setVisible(false);
  refreshBands();
  for (const view of panes.activeIr()?.views() ?? []) view.requestMeasure();
  linking.refresh(); // the pane now shown gets the hovered and pinned lines
  outputs.showOffer();
});
const maxTimeoutS = (): number | null => {
  const limits = conn.hello?.limits as Record<string, unknown> | undefined;
  return typeof limits?.max_timeout_s === "number" ? limits.max_timeout_s : null;
};
const outputs = new OutputsController({ ui, store, panes, tabs, editor: () => editor, follower, refreshBands, refreshLinks: () => linking.refresh(), runs: () => runs, run, runWithTimeout: (s) => void runner.run(s), maxTimeoutS });
route({
  onEvent: (_seq, event) => (outputs.event(event), libraries.event(event)),
  onProblem: (seq, message, status, field) => outputs.problem(seq, message, status, field),
  onDropped: (_seq, why) => outputs.dropped(why),
});
const runs = new RunController(conn, outputs, { take: takeEarly, release });
const runner = new Runner({ store, follower, outputs, across, runs });
// the tab a link names (#out=…) is where its author looked: shown, and kept by the run
const linked = tabFromHash(location.hash);
if (linked !== null) tabs.pick(linked);
else tabs.select("jaxpr");
// the address names the tab on show, so a link copied from it opens there
tabs.onSelect((id) => {
  if (embedId === null && location.hash !== hashFor(id)) history.replaceState(history.state, "", hashFor(id));
});

ui.runBtn.addEventListener("click", run);
ui.cancelBtn.addEventListener("click", () => {
  if (across.cancel()) return;
  // the server answers a cancel with the run's `done` (cancelled)
  if (runs.cancel()) return;
  panes.progress.done("cancelled", null, "before it started");
  outputs.ended();
});
installRunShortcut(document, run);
installShareButton(ui.shareBtn, {
  request: () => {
    const problems: StepProblem[] = [];
    const request = toRequest(store.state, problems);
    return problems.length ? null : request;
  },
  toast: (...content) => toast.show(...content),
  hash: () => hashFor(tabs.active),
});
installNotebookImport(
  installReportButton(ui.shareBtn, {
    request: () => {
      const problems: StepProblem[] = [];
      const request = toRequest(store.state, problems);
      return problems.length ? null : request;
    },
    acrossVersions: () => across.lastVersions,
    toast: (...content) => toast.show(...content),
  }),
  { toast: (...content) => toast.show(...content) },
);

// For scripts and tests: the full texts (CodeMirror renders only what is on screen).
Object.assign(window, {
  jaxplay: {
    text: (kind: IrType, pipeline = "main") => {
      panes.scheduler.flushTab(kind); // a pane not on show may hold its text back
      return panes.ir[kind]?.text(pipeline) ?? null;
    },
    graphNodes: () => panes.graph.get()?.nodeCount() ?? 0,
    /** how the graph is drawn (renderer, layout, times in the worker), and its search */
    graphInfo: () => panes.graph.get()?.info() ?? null,
    graphZoomToLine: (line: number) => panes.graph.get()?.zoomToLine(line) ?? Promise.resolve(false),
    /** runs sent on the WebSocket, and runs started (sent or painted from the page) */
    runsSent: () => conn.sent,
    runsStarted: () => runs.started,
    code: () => editor.state.doc.toString(),
  },
});

void startPage({
  store,
  outputs,
  runs,
  embedId,
  becomeEmbed: (id) => becomeEmbed(id, ui, editor, () => describePipeline(store.state.steps, store.state.entry || "f")),
  loadBackends: () => backends.load(),
  run: () => runner.run(),
});
// the page's words in the reader's language (i18n/), and the tour (tour/): opened by a
// /tour address or the Learn button (issue 53)
const storage = ((): Storage | null => {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
})();
setLang(initialLang(storage, navigator.languages));
installLanguage(ui, storage);
if (embedId === null) installTour({ ui, store, editor: () => editor, pickTab: (id) => tabs.pick(id), run, storage });
// the server's rendition of a shared link (backend/app/web/page.py), on screen until now:
// removed in the task that built the page and painted the link, so no frame shows neither
document.getElementById("jaxplay-static")?.remove();
