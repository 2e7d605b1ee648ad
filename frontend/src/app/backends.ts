// What the server offers (GET /api/v1/backends): its backends in the backend menu
// (only names the request's Backend enum has: any other could only be refused), the
// JAX versions in the version picker, the compile targets and the versions for across
// mode handed on. The state's backend and version are kept listed when the server
// does not name them (a link made elsewhere: the run then says so).
import { h } from "../util/dom";
import { Backend } from "../generated/request";
import type { Layout } from "./layout";
import { parsedOrNull } from "../util/narrow";
import { Backends } from "../connection/protocol";
import type { PlayState } from "../model/state";
import type { VersionInfo } from "./across-controller";
import type { PlayStore } from "./store";

export interface BackendsHooks {
  /** the compile targets offered: GPU targets, TPU topologies */
  targets: (gpuTargets: string[], tpuTopologies: string[]) => void;
  /** the JAX versions offered (across mode) */
  versions: (versions: VersionInfo[]) => void;
  fetch?: typeof fetch;
}

export class BackendsController {
  constructor(
    private readonly ui: Pick<Layout, "backend" | "jaxVersion">,
    private readonly store: PlayStore,
    private readonly hooks: BackendsHooks,
  ) {}

  async load(): Promise<void> {
    const { ui } = this;
    try {
      const r = await (this.hooks.fetch ?? fetch)("/api/v1/backends");
      const parsed = Backends.safeParse(await r.json());
      if (!parsed.success) return;
      for (const b of parsed.data.backends) {
        // a name outside the request's Backend enum could only be refused (422): not offered
        if (b.name === "auto" || parsedOrNull(Backend, b.name) === null || [...ui.backend.options].some((o) => o.value === b.name)) continue;
        const what = [b.device_kind, b.jax_version ? `jax ${b.jax_version}` : ""].filter(Boolean).join(", ");
        ui.backend.append(h("option", { value: b.name }, what ? `${b.name} (${what})` : b.name));
      }
      const state = this.store.state;
      ui.backend.value = state.backend;
      if (ui.backend.value !== state.backend) ui.backend.value = "auto";
      this.hooks.targets(parsed.data.gpu_targets ?? [], parsed.data.tpu_topologies ?? []);
      const versions = parsed.data.backends.find((b) => b.versions?.length)?.versions ?? [];
      this.showVersions(versions);
      this.hooks.versions(versions);
      document.body.dataset.backends = "loaded"; // what the server offers is on show (tests wait for it)
    } catch {
      // the run itself will say if the server is unreachable
    }
  }

  /** The state's backend and JAX version in their menus. */
  show(state: PlayState): void {
    const { ui } = this;
    if (![...ui.backend.options].some((o) => o.value === state.backend)) {
      ui.backend.append(h("option", { value: state.backend }, state.backend));
    }
    ui.backend.value = state.backend;
    this.pickVersion(state.jaxVersion ?? "");
  }

  /** The JAX version picker: the server's versions, newest first; one not installed is
   * listed but disabled (an operator adds it), and the default is marked. */
  private showVersions(versions: VersionInfo[]): void {
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
    this.ui.jaxVersion.replaceChildren(...options);
    this.pickVersion(this.store.state.jaxVersion ?? "");
  }

  /** Selects `version`, adding it when this server does not list it (a link made
   * elsewhere): the run then says it is not installed here, and "default" is offered. */
  private pickVersion(version: string): void {
    const picker = this.ui.jaxVersion;
    if (version && ![...picker.options].some((o) => o.value === version)) {
      picker.append(h("option", { value: version }, `${version} (from the link)`));
    }
    picker.value = version;
  }
}
