// The "libraries" popover beside the JAX version picker: the libraries the selected
// version offers (GET /api/v1/backends), each with its version, what it is and an
// "insert import" button; the ones it does not offer greyed with the reason; after a
// run, the versions its worker had where they differ (accepted.worker.libraries).
// A library the operator offers other versions of has a version menu: the pick is
// sent with each run (`libraries`) and kept in the share link.
// The content is model/libraries.ts's view model; this file only draws it.
import { h } from "../util/dom";
import { importInsertion, keptChoices, librariesView, type LibraryVersion, versionsWithLibraries, withChoice } from "../model/libraries";
import type { RunEvent } from "../connection/protocol";

export interface LibrariesHooks {
  /** the editor's code now */
  code: () => string;
  /** insert `text` at offset `at` of the editor's code */
  insert: (at: number, text: string) => void;
  /** the library versions runs pick now (name -> version; {}: the defaults) */
  chosen?: () => Record<string, string>;
  /** the picks changed */
  choose?: (chosen: Record<string, string>) => void;
}

export class LibrariesPopover {
  readonly button: HTMLButtonElement;
  readonly panel: HTMLElement;
  private versions: LibraryVersion[] = [];
  private worker: { jaxVersion: string; libraries: Record<string, string> } | null = null;

  constructor(
    private readonly picker: HTMLSelectElement,
    private readonly hooks: LibrariesHooks,
  ) {
    this.button = h("button", { type: "button", class: "libs-btn", "aria-expanded": "false", "aria-haspopup": "dialog", title: "the libraries this JAX version offers (Flax, Optax, Equinox…)" }, "libraries");
    this.panel = h("div", { class: "libs-popover", role: "dialog", "aria-label": "Libraries" });
    this.panel.hidden = true;
    const holder = h("span", { class: "libs-holder" }, this.button, this.panel);
    (picker.closest("label") ?? picker).after(holder);
    this.button.addEventListener("click", () => this.toggle(this.panel.hidden !== false));
    picker.addEventListener("change", () => (this.prune(), this.render()));
    document.addEventListener("click", (e) => {
      if (!this.panel.hidden && !holder.contains(e.target as Node)) this.toggle(false);
    });
    holder.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && !this.panel.hidden) (this.toggle(false), this.button.focus());
    });
  }

  /** The backends response's versions (each with its `libraries`). */
  setVersions(versions: readonly unknown[]): void {
    this.versions = versionsWithLibraries(versions);
    this.prune();
    this.render();
  }

  /** A state was shown (a snippet, the autosave): its picks, drawn again. */
  refresh(): void {
    this.render();
  }

  /** Drop the picks the selected JAX version does not offer (another one was picked). */
  private prune(): void {
    const chosen = this.hooks.chosen?.() ?? {};
    const kept = keptChoices(this.versions, this.picker.value, chosen);
    if (Object.keys(kept).length !== Object.keys(chosen).length) this.hooks.choose?.(kept);
  }

  /** A run's event: `accepted` says what its worker had. */
  event(event: RunEvent): void {
    if (event.type !== "accepted" || !event.worker) return;
    const w = event.worker;
    this.worker = w.libraries ? { jaxVersion: w.jax_version ?? "", libraries: w.libraries } : null;
    this.render();
  }

  private toggle(open: boolean): void {
    this.panel.hidden = !open;
    this.button.setAttribute("aria-expanded", String(open));
    if (!open) return;
    this.render();
    // kept inside the window: shifted left by what would overflow on the right
    this.panel.style.left = "0px";
    const over = this.panel.getBoundingClientRect().right - (document.documentElement.clientWidth - 8);
    if (over > 0) this.panel.style.left = `${-Math.min(over, this.panel.getBoundingClientRect().left)}px`;
  }

  private render(): void {
    if (this.panel.hidden) return;
    const chosen = this.hooks.chosen?.() ?? {};
    const view = librariesView(this.versions, this.picker.value, this.worker, chosen);
    const rows = view.rows.map((r) =>
      h(
        "li",
        { class: r.offered ? "" : "libs-off", title: r.offered ? r.importLine : r.reason, "data-library": r.name },
        h("span", { class: "libs-name mono" }, r.name),
        r.offered && r.alternatives.length > 0 && this.hooks.choose
          ? this.versionMenu(r.name, r.version, r.alternatives, r.chosen, chosen)
          : h("span", { class: "libs-version mono" }, r.offered ? r.version : "—"),
        r.workerVersion ? h("span", { class: "libs-worker mono", title: "the version the last run's worker had" }, `ran ${r.workerVersion}`) : null,
        h("span", { class: "libs-what" }, r.offered ? r.what : r.reason),
        r.offered
          ? h("button", { type: "button", class: "libs-insert", title: `add \`${r.importLine}\` at the top of the code`, onclick: () => this.insert(r.importLine) }, "insert import")
          : null,
      ),
    );
    this.panel.replaceChildren(h("h3", {}, view.title));
    if (rows.length) this.panel.append(h("ul", { class: "libs-list" }, rows));
    if (view.note) this.panel.append(h("p", { class: "pane-note" }, view.note));
  }

  /** The library's versions: the default first; picking one is sent with each run. */
  private versionMenu(name: string, version: string, alternatives: string[], picked: string, chosen: Record<string, string>): HTMLSelectElement {
    const menu = h(
      "select",
      { class: "libs-version libs-pick mono", "aria-label": `${name} version`, title: `the ${name} version runs import (the operator offers ${alternatives.length + 1})` },
      h("option", { value: "" }, `${version} (default)`),
      ...alternatives.map((v) => h("option", { value: v }, v)),
    );
    menu.value = picked;
    menu.addEventListener("change", () => {
      this.hooks.choose?.(withChoice(chosen, name, menu.value));
      this.render();
    });
    return menu;
  }

  private insert(line: string): void {
    const ins = importInsertion(this.hooks.code(), line);
    if (ins) this.hooks.insert(ins.at, ins.insert);
  }
}
