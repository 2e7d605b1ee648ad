// Remarks: why JAX traced or compiled again, each at the code line it names.
import { clear, h } from "../util/dom";
import { LastEventPane } from "./pane";

export class RemarksPane extends LastEventPane<"remarks"> {
  readonly consumes = ["remarks"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    return this.event?.items.length ? String(this.event.items.length) : "";
  }

  protected render(): void {
    clear(this.root);
    const items = this.event?.items ?? null;
    if (items === null) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No remarks in this run." : "Waiting for the remarks…"));
      return;
    }
    if (items.length === 0) {
      this.root.append(h("p", { class: "pane-note" }, "JAX traced and compiled nothing twice."));
      return;
    }
    const list = h("ul", { class: "remarks" });
    for (const r of items) {
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
