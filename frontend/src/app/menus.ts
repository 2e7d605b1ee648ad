// The Examples and Presets menus: picking an example shows it (the backend kept) and
// runs it; a preset sets the pipelines (or loads its example) and runs.
import { EXAMPLES, PRESETS } from "../model/examples";
import type { Layout } from "./layout";
import type { PipelinesController } from "./pipelines";
import type { PlayStore } from "./store";

export interface MenuHooks {
  /** the example's code shown: the editor's error marker cleared */
  clearErrorMark: () => void;
  run: () => void;
}

export function installMenus(ui: Pick<Layout, "examples" | "presets">, store: PlayStore, pipelines: PipelinesController, hooks: MenuHooks): void {
  ui.examples.addEventListener("change", () => {
    const ex = EXAMPLES.find((e) => e.id === ui.examples.value);
    ui.examples.value = "";
    if (!ex) return;
    store.show({ ...structuredClone(ex.state), backend: store.state.backend });
    hooks.clearErrorMark();
    hooks.run();
  });
  ui.presets.addEventListener("change", () => {
    const preset = PRESETS.find((p) => p.id === ui.presets.value);
    ui.presets.value = "";
    if (!preset) return;
    const ex = preset.example ? EXAMPLES.find((e) => e.id === preset.example) : undefined;
    if (ex) store.show({ ...structuredClone(ex.state), backend: store.state.backend });
    else {
      store.state.steps = structuredClone(preset.steps);
      pipelines.a.set(store.state.steps);
      pipelines.setCompare(preset.compare !== null, structuredClone(preset.compare));
      store.changed();
    }
    hooks.run();
  });
}
