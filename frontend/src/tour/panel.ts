// The tour's panel: one step's text (its paragraphs, what to look at, the "try this"
// edit and what should change), the step picker, back and next. A view only: what a
// button does is the controller's (tour/tour.ts). Text goes in as text; a `code`
// span of the catalogue's text becomes a <code> element.
import { clear, h } from "../util/dom";
import { t, type Lang } from "../i18n";
import { tabTitle } from "../app/page-words";
import { codeSpans, TOUR, type TourStep } from "./catalogue";
import "./tour.css";

export interface PanelActions {
  go: (step: TourStep) => void;
  apply: () => void;
  reset: () => void;
  close: () => void;
}

/** `text` with its `code` spans as <code> elements. */
function rich(text: string): (Node | string)[] {
  return codeSpans(text).map((p) => (p.code ? h("code", {}, p.text) : p.text));
}

export class TourPanel {
  readonly root: HTMLElement;
  private readonly note: HTMLElement;

  constructor(private readonly actions: PanelActions) {
    this.root = h("aside", { class: "tour", "data-testid": "tour", "aria-labelledby": "tour-title", hidden: true });
    this.note = h("p", { class: "tour-note", role: "status", "aria-live": "polite", "data-testid": "tour-note" });
  }

  /** Draws `step` in `lang`; `note` a line above it (an unknown step's, say). */
  show(step: TourStep, lang: Lang, note = ""): void {
    const text = step.text[lang];
    const last = step.number === TOUR.length;
    const picker = h(
      "select",
      { class: "tour-pick", "data-testid": "tour-pick", "aria-label": t("tour.pick") },
      ...TOUR.map((s) => h("option", { value: s.id, selected: s.id === step.id }, `${s.number}. ${s.text[lang].title}`)),
    );
    picker.addEventListener("change", () => {
      const to = TOUR.find((s) => s.id === picker.value);
      if (to) this.actions.go(to);
    });
    const back = h("button", { type: "button", "data-testid": "tour-back", disabled: step.number === 1 }, `← ${t("tour.back")}`);
    back.addEventListener("click", () => this.actions.go(TOUR[step.number - 2]!));
    const next = h("button", { type: "button", class: "primary", "data-testid": "tour-next", disabled: last }, `${t("tour.next")} →`);
    next.addEventListener("click", () => this.actions.go(TOUR[step.number]!));
    const apply = h("button", { type: "button", "data-testid": "tour-apply" }, t("tour.apply"));
    apply.addEventListener("click", () => this.actions.apply());
    const reset = h("button", { type: "button", class: "linklike", "data-testid": "tour-reset" }, t("tour.reset"));
    reset.addEventListener("click", () => this.actions.reset());
    const close = h("button", { type: "button", class: "tour-close", "data-testid": "tour-close", "aria-label": t("tour.close"), title: t("tour.close") }, "✕");
    close.addEventListener("click", () => this.actions.close());
    const lines = step.marks.join(", ");
    this.note.textContent = note;
    clear(this.root);
    this.root.lang = lang === "zh" ? "zh-Hans" : "en";
    this.root.dataset.step = step.id;
    this.root.append(
      // back and next at the top, where they stay in sight however long the step
      h("div", { class: "tour-head" }, h("span", { class: "tour-count", "data-testid": "tour-count" }, t("tour.step", { n: step.number, total: TOUR.length })), picker, h("nav", { class: "tour-nav", "aria-label": t("tour.label") }, back, next), close),
      this.note,
      h(
        "div",
        { class: "tour-cols" },
        h("div", { class: "tour-text" }, h("h2", { id: "tour-title", class: "tour-title" }, text.title), ...text.body.map((p) => h("p", {}, ...rich(p))), h("p", { class: "tour-look" }, t("tour.look", { tab: tabTitle(step.tab), lines }))),
        h(
          "div",
          { class: "tour-side" },
          h("section", { class: "tour-try", "aria-labelledby": "tour-try-title" }, h("h3", { id: "tour-try-title" }, t("tour.try")), h("p", {}, ...rich(text.try)), h("div", { class: "tour-try-actions" }, apply, reset)),
          h("section", { class: "tour-see", "aria-labelledby": "tour-see-title" }, h("h3", { id: "tour-see-title" }, t("tour.see")), h("p", {}, ...rich(text.see))),
          ...(last ? [h("p", { class: "tour-end" }, t("tour.end"))] : []),
        ),
      ),
    );
    this.root.hidden = false;
  }

  /** A line about the step on show (the try edit could not be made, say). */
  say(message: string): void {
    this.note.textContent = message;
  }

  hide(): void {
    this.root.hidden = true;
  }
}
