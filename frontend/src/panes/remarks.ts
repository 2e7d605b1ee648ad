// Remarks: why JAX traced or compiled again, each at the code line it names.
import { clear, h } from "../dom";
import type { EventOf, RunEvent } from "../protocol";
import type { OutputPane } from "./pane";

export class RemarksPane implements OutputPane {
  readonly consumes = ["remarks"] as const;
  private items: EventOf<"remarks">["items"] | null = null;
  private ended = false;

  constructor(
    readonly root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
  ) {
    this.render();
  }

  reset(): void {
    this.items = null;
    this.ended = false;
    this.render();
  }

  show(event: RunEvent): void {
    if (event.type !== "remarks") return;
    this.items = event.items;
    this.render();
  }

  end(): void {
    this.ended = true;
    this.render();
  }

  badge(): string {
    return this.items?.length ? String(this.items.length) : "";
  }

  private render(): void {
    clear(this.root);
    if (this.items === null) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No remarks in this run." : "Waiting for the remarks…"));
      return;
    }
    if (this.items.length === 0) {
      this.root.append(h("p", { class: "pane-note" }, "JAX traced and compiled nothing twice."));
      return;
    }
    const list = h("ul", { class: "remarks" });
    for (const r of this.items) {
      const at = r.line != null ? h("button", { type: "button", class: "linklike" }, `line ${r.line}`) : null;
      if (at && r.line != null) {
        const line = r.line;
        at.addEventListener("click", () => this.onLine(line));
      }
      list.append(h("li", {}, h("span", { class: "remark-kind" }, r.kind), " ", at, h("pre", { class: "mono" }, r.message)));
    }
    this.root.append(list);
  }
}
