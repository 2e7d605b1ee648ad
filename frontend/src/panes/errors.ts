// Errors: the kind, the line (a button that jumps there), the hint, JAX's page for
// it, and the full message. Also the server's own refusals (422, 429, 503).
import { clear, docLink, h, withCode } from "../util/dom";
import { localHint, t } from "../i18n";
import { isDocUrl, type EventOf } from "../connection/protocol";

export class ErrorsPane {
  private count = 0;
  private list: HTMLElement;
  private note: HTMLElement;

  constructor(
    readonly root: HTMLElement,
    private readonly onGoToLine: (line: number) => void,
  ) {
    this.note = h("p", { class: "pane-note" }, t("errors.none"));
    this.list = h("div", { class: "errors" });
    root.append(this.note, this.list);
  }

  /** A run starts: its errors come here; until it ends, none so far is not "No errors."
   * (the last run's words must not look like this one's). */
  reset(): void {
    this.count = 0;
    clear(this.list);
    this.note.hidden = false;
    this.say(t("errors.going"));
  }

  /** The run ended: with none, "No errors." is true now. */
  ended(): void {
    this.say(t("errors.none"));
  }

  private say(text: string): void {
    if (this.note.textContent !== text) this.note.textContent = text;
    this.note.dataset.live = String(text !== t("errors.none"));
  }

  size(): number {
    return this.count;
  }

  addRunError(e: EventOf<"error">, pipelineLabel: string | null): void {
    this.count++;
    this.note.hidden = true;
    const line = e.line ?? null;
    this.list.append(
      h(
        "article",
        { class: "error-card", "data-kind": e.kind },
        h(
          "header",
          {},
          h("strong", { class: "error-kind" }, e.kind),
          e.stage ? h("span", { class: "badge" }, t("errors.at", { stage: e.stage })) : null,
          pipelineLabel ? h("span", { class: "badge" }, pipelineLabel) : null,
          line !== null
            ? h("button", { type: "button", class: "linklike error-line", onclick: () => this.onGoToLine(line) }, t("errors.line", { n: line }))
            : null,
        ),
        e.hint ? h("p", { class: "error-hint" }, withCode(localHint(e.hint))) : null,
        // only JAX's (or Python's) documentation: the server refuses any other link,
        // and the page does not take its word for it
        isDocUrl(e.doc_url) ? h("p", { class: "error-doc" }, t("errors.more"), docLink(e.doc_url, e.doc_url)) : null,
        h("details", { open: !e.hint }, h("summary", {}, t("errors.message")), h("pre", { class: "error-message", tabindex: 0 }, e.message)),
      ),
    );
  }

  /** Before an argument-count TypeError: what the args box gives against what the entry
   * takes, in words, with the one-click fix. */
  addArgsFix(message: string, fixLabel: string | null, onFix: () => void): void {
    this.note.hidden = true;
    this.list.prepend(
      h(
        "article",
        { class: "error-card problem args-fix", "data-testid": "args-fix" },
        h("header", {}, h("strong", { class: "error-kind" }, "The args box does not match the function")),
        h("p", { class: "error-hint" }, withCode(message)),
        fixLabel ? h("p", {}, h("button", { type: "button", class: "primary", "data-testid": "fill-args", onclick: onFix }, fixLabel)) : null,
      ),
    );
  }

  addProblem(title: string, message: string, detail?: string, action?: ProblemAction): void {
    this.count++;
    this.note.hidden = true;
    this.list.append(
      h(
        "article",
        { class: "error-card problem" },
        h("header", {}, h("strong", { class: "error-kind" }, title)),
        h("p", { class: "error-hint" }, message),
        detail ? h("pre", { class: "error-message" }, detail) : null,
        action
          ? h("p", {}, h("button", { type: "button", class: "primary", "data-testid": action.testid, onclick: action.onClick }, action.label))
          : null,
      ),
    );
  }
}

/** A problem's one-click remedy (a run again with the server's longest time). */
export interface ProblemAction {
  label: string;
  testid: string;
  onClick: () => void;
}
