// Passes: every HLO pass that changed the module, as a filterable list, and a
// before/after diff of the selected one, with the colour bands linking its lines to
// the code (each text's own source map, from its HLO metadata).
import { MergeView } from "@codemirror/merge";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import { EditorState } from "@codemirror/state";
import { EditorView, keymap, lineNumbers } from "@codemirror/view";
import { clear, h } from "../util/dom";
import { highlighting } from "../editor/highlight";
import { outputLinking, setSources, sourceMap } from "../editor/linking";
import { hloLanguage } from "../editor/modes";
import type { RunEvent } from "../connection/protocol";
import { changedLines, filterPasses, passTexts, type PassText } from "../model/xla";
import type { HoverFn } from "./ir";
import { passTimeIndex, passTimeKey } from "./profile";
import type { OutputPane } from "./pane";

export class PassesPane implements OutputPane {
  readonly consumes = ["passes", "profile"] as const;
  private texts = new Map<string, PassText[]>();
  /** per pipeline, each pass's time in the compile, from the profile output */
  private times = new Map<string, Map<string, number>>();
  private notes = new Map<string, string[]>();
  private labels: Record<string, string> = {};
  private shown = "main";
  private selected = 1;
  private query = "";
  private hideMetadata = false;
  private ended = false;
  private merge: MergeView | null = null;
  private readonly note = h("p", { class: "pane-note", role: "status" });
  private readonly list = h("ol", { class: "pass-list", "aria-label": "Passes that changed the module" });
  private readonly diff = h("div", { class: "pass-diff" });
  private readonly which = h("select", { "aria-label": "Pipeline", hidden: true });

  constructor(
    readonly root: HTMLElement,
    private readonly onHover: HoverFn,
    private readonly onPin: (codeLine: number) => void,
  ) {
    const filter = h("input", { type: "search", placeholder: "filter passes", "aria-label": "Filter passes by name", class: "mono" }) as HTMLInputElement;
    filter.addEventListener("input", () => {
      this.query = filter.value;
      this.render();
    });
    const hide = h("input", { type: "checkbox", id: "passes-hide-metadata" }) as HTMLInputElement;
    hide.addEventListener("change", () => {
      this.hideMetadata = hide.checked;
      this.render();
    });
    this.which.addEventListener("change", () => {
      this.shown = (this.which as HTMLSelectElement).value;
      this.selected = 1;
      this.render();
    });
    const bar = h("div", { class: "pass-bar" }, this.which, filter, h("label", { for: "passes-hide-metadata", title: "hide passes whose only change is to instructions' metadata" }, hide, "hide metadata-only changes"));
    root.append(this.note, bar, h("div", { class: "passes" }, this.list, this.diff));
    this.render();
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.texts.clear();
    this.notes.clear();
    this.times.clear();
    this.labels = labels;
    this.shown = "main";
    this.selected = 1;
    this.ended = false;
    clear(this.which);
    for (const p of pipelines) this.which.append(h("option", { value: p }, this.labels[p] ?? p));
    this.which.hidden = pipelines.length < 2;
    this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === "profile") {
      if (event.passes) this.times.set(pipeline, passTimeIndex(event.passes));
      this.render();
      return;
    }
    if (event.type !== "passes") return;
    try {
      this.texts.set(pipeline, passTexts(event.items));
      this.notes.set(pipeline, event.notes ?? []);
    } catch (err) {
      this.texts.set(pipeline, []);
      this.notes.set(pipeline, [`the passes could not be shown: ${(err as Error).message}`]);
    }
    this.render();
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  badge(): string {
    const n = this.texts.get("main")?.length ?? 0;
    return n > 1 ? String(n - 1) : "";
  }

  private render(): void {
    const texts = this.texts.get(this.shown);
    const notes = this.notes.get(this.shown) ?? [];
    this.note.textContent = texts
      ? notes.join(" · ")
      : this.ended
        ? "No passes in this run (not asked for, or the run ended before compiling)."
        : "Waiting for the passes…";
    this.note.hidden = this.note.textContent === "";
    clear(this.list);
    if (!texts || texts.length < 2) {
      this.showDiff(null, null);
      return;
    }
    const listed = filterPasses(texts, this.query, this.hideMetadata);
    const times = this.times.get(this.shown);
    if (!listed.some((t) => t.index === this.selected)) this.selected = listed[1]?.index ?? 0;
    for (const t of listed) {
      const before = texts[t.index - 1];
      const size = before ? changedLines(before.text, t.text) : null;
      const li = h(
        "li",
        { class: t.index === this.selected ? "selected" : "", "data-index": t.index, tabindex: 0, role: "button", "aria-pressed": String(t.index === this.selected) },
        h("span", { class: "pass-name mono" }, t.pass),
        h("span", { class: "pass-pipeline" }, t.pipeline),
        size ? h("span", { class: "pass-size", title: "lines removed / added" }, `−${size.removed} +${size.added}`) : h("span", { class: "pass-size" }, "start"),
        times?.has(passTimeKey(t.pipeline, t.pass))
          ? h("span", { class: "pass-time", title: "every run of this pass in this pipeline during the compile (the profile output)" }, `${(times.get(passTimeKey(t.pipeline, t.pass))! / 1000).toFixed(2)} ms`)
          : null,
      );
      const pick = () => {
        this.selected = t.index;
        this.render();
      };
      li.addEventListener("click", pick);
      li.addEventListener("keydown", (e) => {
        if ((e as KeyboardEvent).key === "Enter" || (e as KeyboardEvent).key === " ") pick();
      });
      this.list.append(li);
    }
    const after = texts[this.selected]!;
    this.showDiff(texts[this.selected - 1] ?? null, after);
  }

  private showDiff(before: PassText | null, after: PassText | null): void {
    this.merge?.destroy();
    this.merge = null;
    clear(this.diff);
    if (!after) return;
    const ext = (label: string) => [
      EditorState.readOnly.of(true),
      lineNumbers(),
      hloLanguage,
      highlighting,
      highlightSelectionMatches(),
      keymap.of(searchKeymap),
      outputLinking(this.onHover, this.onPin),
      EditorView.contentAttributes.of({ "aria-label": label, "data-testid": `pass-${label.split(" ")[0]}`, tabindex: "0" }),
    ];
    this.diff.append(
      h("div", { class: "merge-head" }, h("span", {}, before ? `before ${after.pass}` : "(start)"), h("span", {}, `after ${after.pass}`)),
    );
    const holder = h("div", { class: "merge-holder" });
    this.diff.append(holder);
    this.merge = new MergeView({
      parent: holder,
      a: { doc: before?.text ?? "", extensions: ext("before pass") },
      b: { doc: after.text, extensions: ext("after pass") },
      highlightChanges: true,
      gutter: true,
      // a pass usually changes a few lines of a long module: show those, fold the rest
      collapseUnchanged: { margin: 3, minSize: 8 },
      diffConfig: { scanLimit: 2000 },
    });
    this.merge.a.dispatch({ effects: setSources.of(sourceMap(before?.sources)) });
    this.merge.b.dispatch({ effects: setSources.of(sourceMap(after.sources)) });
  }

  /** The views showing text now (for the colour bands and hover). */
  views(): EditorView[] {
    return this.merge ? [this.merge.a, this.merge.b] : [];
  }
}
