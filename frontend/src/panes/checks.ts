// Checks: what the request's one-click checks found (docs/api.md#checks), per
// pipeline: each result's status, JAX's words, and its code line (a click shows it).
import { clear, h } from "../util/dom";
import { localHint } from "../i18n";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

type Result = EventOf<"checks">["results"][number];

const STATUS_TEXT: Record<Result["status"], string> = { ok: "ok", failed: "failed", error: "could not run", skipped: "skipped" };

function figure(value: Result["max_abs_error"]): string {
  return typeof value === "number" ? value.toPrecision(4) : String(value ?? "—");
}

export class ChecksPane extends PerPipelinePane<"checks"> {
  readonly consumes = ["checks"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
  ) {
    super(root);
    this.render();
  }

  /** how many checks failed (the tab's badge) */
  badge(): string {
    let failed = 0;
    for (const ev of this.events.values()) failed += ev.results.filter((r) => r.status === "failed").length;
    return failed ? String(failed) : "";
  }

  private result(r: Result): HTMLElement {
    const name = r.order != null ? `${r.name} (order ${r.order}, ${r.mode ?? ""})` : r.name;
    const line = r.line ?? null;
    const at = line !== null ? h("button", { type: "button", class: "linklike", "data-testid": "check-line" }, `line ${line}`) : null;
    if (at && line !== null) at.addEventListener("click", () => this.onLine(line));
    const errors =
      r.max_abs_error != null || r.max_rel_error != null
        ? h("p", { class: "check-errors", "data-testid": "check-errors" }, `max absolute error ${figure(r.max_abs_error)} · max relative error ${figure(r.max_rel_error)}`)
        : null;
    return h(
      "li",
      { class: `check check-${r.status}`, "data-check": r.name, "data-status": r.status },
      h("span", { class: "check-status" }, STATUS_TEXT[r.status]),
      " ",
      h("strong", {}, name),
      " ",
      at,
      errors,
      h("pre", { class: "mono check-message", tabindex: 0 }, r.message),
      r.hint ? h("p", { class: "check-hint" }, localHint(r.hint)) : null,
    );
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      const note = this.ended ? "No checks in this run: tick them in the checks box." : "Waiting for the checks…";
      this.root.append(h("p", { class: "pane-note" }, note));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (!ev) continue;
      this.root.append(
        h(
          "section",
          { class: "checks-pipeline" },
          this.pipelines.length > 1 ? h("h3", {}, this.labels[p] ?? p) : null,
          h("ul", { class: "checks" }, ...ev.results.map((r) => this.result(r))),
        ),
      );
    }
  }
}
