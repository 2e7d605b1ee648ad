// The page's skeleton: the top bar, the editor column, the pipeline builders, the
// progress line and the output tabs (from the one tab table, model/tabtable.ts).
// Behaviour lives in the controllers of app/, wired together by main.ts.
import { h } from "../util/dom";
import { buildCompute, closesOutside, keepsOnScreen } from "../controls/compute";
import { EXAMPLES, PRESETS } from "../model/examples";
import { CONFIG_TOGGLES } from "../model/state";
import { GROUP_TITLES, GROUPS, TABS, type GroupId, type TabId } from "../model/tabtable";

export function buildLayout(root: HTMLElement) {
  const examples = h(
    "select",
    { id: "examples", "aria-label": "Load an example" },
    h("option", { value: "" }, "Examples…"),
    ...EXAMPLES.map((e) => h("option", { value: e.id }, e.title)),
  );
  const presets = h(
    "select",
    { id: "presets", "aria-label": "Set the pipeline from a preset" },
    h("option", { value: "" }, "Presets…"),
    ...PRESETS.map((p) => h("option", { value: p.id }, p.title)),
  );
  const backend = h("select", { id: "backend", "aria-label": "Backend" }, h("option", { value: "auto" }, "auto"));
  const jaxVersion = h("select", { id: "jax-version", "aria-label": "JAX version", title: "the JAX version the run uses (GET /api/v1/backends lists them)" }, h("option", { value: "" }, "default"));
  // compile for a GPU the server does not have (gpu_target): shown only when it offers one
  const gpuTarget = h("select", { id: "gpu-target", "data-testid": "gpu-target", "aria-label": "Compile for a GPU target", title: "gpu_target: compile for this NVIDIA GPU without one (XLA's deviceless compile); asm is its PTX; nothing runs" }, h("option", { value: "" }, "this worker"));
  const gpuTargetLabel = h("label", { class: "inline", hidden: true }, "compile for ", gpuTarget);
  const devices = h("input", { id: "devices", type: "number", min: 1, max: 64, step: 1, value: 1, "aria-label": "Devices", title: "devices the run sees (virtual CPU devices on CPU)" });
  const configBoxes = CONFIG_TOGGLES.map((c) => h("input", { type: "checkbox", "data-config": c.name, id: `cfg-${c.name}` }));
  // how a pallas_call without interpret= runs on a CPU run (the request's pallas_interpret)
  const pallasHelp = "a pallas_call without interpret= on the CPU: JAX's interpreter (interpret=True), or its TPU-simulating one with race detection (races as remarks; uninitialised memory NaN)";
  const pallasInterpret = h("select", { id: "pallas-interpret", "data-testid": "pallas-interpret", title: pallasHelp }, h("option", { value: "auto" }, "interpret"), h("option", { value: "tpu_races" }, "TPU, races"));
  // the export output's request fields (model/export_fields.ts): sent when Export is ticked
  const exportShapes = h("input", { id: "export-shapes", "data-testid": "export-shapes", type: "text", placeholder: "b, 3; …", title: "export_shapes: one symbolic shape per argument in JAX's syntax, separated by ; (empty: its own shape)" });
  const exportPlatforms = h("input", { id: "export-platforms", "data-testid": "export-platforms", type: "text", placeholder: "cpu, cuda, tpu", title: "export_platforms: the platforms jax.export lowers for (empty: this worker's)" });
  const config = h(
    "details",
    { class: "config" },
    h("summary", {}, "config"),
    h("div", { class: "config-body" }, ...CONFIG_TOGGLES.map((c, i) => h("label", { for: `cfg-${c.name}`, title: c.help }, configBoxes[i]!, c.label)), h("label", { for: "pallas-interpret", title: pallasHelp }, "Pallas ", pallasInterpret), h("label", { for: "export-shapes" }, "export shapes ", exportShapes), h("label", { for: "export-platforms" }, "export platforms ", exportPlatforms)),
  );
  // what to compute (controls/compute.ts): the opt-in outputs and the checks, with their costs
  const compute = buildCompute();
  const { outputBoxes, checks, targetNote, flags, flagsB } = compute;
  const xlaOutputs = compute.box;
  closesOutside(config);
  closesOutside(xlaOutputs);
  keepsOnScreen(config);
  keepsOnScreen(xlaOutputs);
  const compareBtn = h("button", { type: "button", id: "compare", "aria-pressed": "false", title: "run a second pipeline B beside A, with a diff" }, "Compare");
  const acrossBtn = h("button", { type: "button", id: "across", "aria-pressed": "false", title: "run on several JAX versions: where each output first changed, and the times" }, "Across versions");
  const themeBtn = h("button", { type: "button", id: "theme", "aria-label": "Switch between light and dark", title: "light / dark" }, "◐");
  const shareBtn = h("button", { type: "button", id: "share", title: "store this snippet and copy its link" }, "Share");
  const runBtn = h("button", { type: "button", id: "run", class: "primary", title: "Ctrl+Enter / Cmd+Enter" }, "Run");
  const cancelBtn = h("button", { type: "button", id: "cancel", disabled: true }, "Cancel");
  const toast = h("div", { class: "toast", role: "status", "aria-live": "polite", hidden: true });

  const editorHolder = h("div", { class: "editor-holder" });
  const entry = h("input", { id: "entry", class: "mono", value: "f", spellcheck: "false", autocomplete: "off", size: 6 });
  const args = h("input", { id: "args", class: "mono", spellcheck: "false", autocomplete: "off", placeholder: "(jnp.ones(3),)", "aria-describedby": "args-note" });
  // Says when the args were filled from the entry's signature (they stay editable).
  const argsNote = h("p", { id: "args-note", class: "args-note", role: "status", "aria-live": "polite" });
  // the mesh builder (controls/meshbuilder.ts fills it): a mesh and a PartitionSpec per argument
  const meshHolder = h("details", { class: "sharding-builder", "data-testid": "mesh-builder" }, h("summary", { title: "run over a device mesh with shardings (jax.make_mesh, in_shardings, out_shardings)" }, "sharding"));
  const left = h(
    "section",
    { class: "left", "aria-label": "Code" },
    editorHolder,
    h(
      "div",
      { class: "call-row" },
      h("label", { for: "entry" }, "entry"),
      entry,
      h("label", { for: "args" }, "args"),
      args,
    ),
    argsNote,
    meshHolder,
  );

  const pipeA = h("div", { class: "pipeline pipeline-a", "data-testid": "pipeline-A" });
  const pipeB = h("div", { class: "pipeline pipeline-b", "data-testid": "pipeline-B", hidden: true });
  // across-versions mode (panes/across.ts fills it); it replaces the outputs while on
  const acrossHolder = h("section", { class: "across", "aria-label": "Across versions", "data-testid": "across", hidden: true });
  const progress = h("div", { class: "progress" });
  // a warning about the run on show (its code wrote to jaxplay's output channel)
  const banner = h("div", { class: "run-banner", role: "alert", "data-testid": "run-banner", hidden: true });
  // an opt-in output the run did not ask for: one click runs again with it (main.ts)
  const offer = h("div", { class: "rerun-offer", "data-testid": "rerun-offer", hidden: true });
  const bands = h("input", { type: "checkbox", id: "bands", checked: true });
  // Says which code line is pinned (a click on a linked line); clicking it unpins.
  const pinNote = h("button", { type: "button", class: "pin-note linklike", hidden: true, "data-testid": "pinned" });
  const tablist = h("div", { role: "tablist", class: "tabs", "aria-label": "Outputs", "data-testid": "tabs" });
  const tabs = {} as Record<TabId, HTMLButtonElement>;
  const panels = {} as Record<TabId, HTMLElement>;
  // the groups (model/tabtable.ts): one group's run of tabs on show at a time, picked on
  // the group switcher: every output one or two clicks away, at any width, however
  // many there are (a bar of them all wrapped to four rows at 1280 px)
  const groupRuns = {} as Record<GroupId, HTMLElement>;
  const groupButtons = {} as Record<GroupId, HTMLButtonElement>;
  const groupSwitcher = h("div", { class: "tab-groups", role: "group", "aria-label": "Output groups", "data-testid": "tab-groups" });
  const panelHolder = h("div", { class: "panels" });
  for (const g of GROUPS) {
    const names = GROUP_TITLES[g.id];
    const members = g.tabs.map((id) => TABS.find((t) => t.id === id)!.title).join(", ");
    groupButtons[g.id] = h("button", { type: "button", class: "tab-group-button", "data-group": g.id, "aria-pressed": "false", "aria-label": names.title, title: `${names.title}: ${members}` }, h("span", { class: "full" }, names.title), h("span", { class: "short", "aria-hidden": "true" }, names.short));
    groupSwitcher.append(groupButtons[g.id]);
    // role none: the tablist's tabs are its own (the run is only their layout)
    groupRuns[g.id] = h("div", { class: "tab-group", role: "none", "data-group": g.id });
    tablist.append(groupRuns[g.id]);
  }
  for (const t of TABS) {
    const tab = h("button", { type: "button", role: "tab", id: `tab-${t.id}`, "aria-controls": `panel-${t.id}`, "aria-selected": "false", tabindex: -1, "data-tab": t.id, "data-group": t.group }, t.title, h("span", { class: "tab-badge" }));
    const panel = h("div", { role: "tabpanel", id: `panel-${t.id}`, "aria-labelledby": `tab-${t.id}`, class: `panel panel-${t.id}`, hidden: true, tabindex: 0 });
    tabs[t.id] = tab;
    panels[t.id] = panel;
    groupRuns[t.group].append(tab);
    panelHolder.append(panel);
  }
  const right = h(
    "section",
    { class: "right", "aria-label": "Pipeline and outputs" },
    h("div", { class: "pipelines" }, pipeA, pipeB),
    acrossHolder,
    progress,
    banner,
    h("div", { class: "tabs-row" }, groupSwitcher, tablist, pinNote, h("label", { class: "bands-toggle", for: "bands", title: "colour bands linking code and output lines" }, bands, "bands")),
    offer,
    panelHolder,
  );

  const topbar = h(
      "header",
      { class: "topbar" },
      h("h1", {}, h("span", { class: "logo" }, "jaxplay"), h("span", { class: "tagline" }, " what JAX makes of your function")),
      h("nav", { class: "controls", "aria-label": "Controls" }, examples, presets, h("label", { class: "inline" }, "backend ", backend), gpuTargetLabel, h("label", { class: "inline" }, "devices ", devices), h("label", { class: "inline" }, "jax ", jaxVersion), config, xlaOutputs, compareBtn, acrossBtn, themeBtn, shareBtn, cancelBtn, runBtn),
  );
  root.append(
    topbar,
    h("main", { class: "layout" }, left, right),
    toast,
  );
  return { compute, topbar, examples, presets, backend, gpuTarget, gpuTargetLabel, targetNote, devices, jaxVersion, configBoxes, pallasInterpret, exportShapes, exportPlatforms, outputBoxes, checks, xlaOutputs, flags, flagsB, compareBtn, acrossBtn, acrossHolder, themeBtn, shareBtn, runBtn, cancelBtn, toast, editorHolder, entry, args, argsNote, meshHolder, pipeA, pipeB, progress, banner, offer, bands, pinNote, tabs, panels, groupRuns, groupButtons, groupSwitcher };
}

/** The page's elements, as buildLayout makes them. */
export type Layout = ReturnType<typeof buildLayout>;
