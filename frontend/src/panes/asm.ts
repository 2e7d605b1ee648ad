// Assembly: each compiled kernel's disassembly, under the HLO instruction it
// computes and the code lines that made it (hovering a kernel lights them).
import { clear, h } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

/** The code lines the pane's hover links: each kernel's. */
export function asmLines(events: Iterable<EventOf<"asm">>): Set<number> {
  return new Set([...events].flatMap((e) => e.kernels.flatMap((k) => k.lines ?? [])));
}

export class AsmPane extends PerPipelinePane<"asm"> {
  readonly consumes = ["asm"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    const n = this.events.get("main")?.kernels.length ?? 0;
    return n ? String(n) : "";
  }

  codeLines(): Set<number> {
    return asmLines(this.events.values());
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No assembly in this run." : "Waiting for the kernels…"));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (!ev) continue;
      const section = h("section", { class: "asm-pipeline" });
      if (this.pipelines.length > 1) section.append(h("h3", {}, this.labels[p] ?? p));
      for (const note of ev.notes ?? []) section.append(h("p", { class: "pane-note" }, note));
      for (const k of ev.kernels) {
        const lines = k.lines ?? [];
        const count = k.asm.split("\n").filter((l) => l.trim()).length;
        const head = h(
          "summary",
          {},
          h("span", { class: "mono" }, k.name),
          k.fusion && k.fusion !== k.name ? h("span", { class: "asm-fusion" }, ` ← ${k.fusion}`) : null,
          h("span", { class: "asm-meta" }, ` · ${count} instructions${lines.length ? ` · line${lines.length > 1 ? "s" : ""} ${lines.join(", ")}` : ""}`),
        );
        const body = h("pre", { class: "asm-code mono", "data-testid": "asm-code", tabindex: 0 }, k.asm);
        const parts = [head, body];
        if (k.llvm_ir_before) parts.push(h("details", {}, h("summary", {}, "LLVM IR as XLA emitted it"), h("pre", { class: "mono", tabindex: 0 }, k.llvm_ir_before)));
        if (k.llvm_ir) parts.push(h("details", {}, h("summary", {}, "LLVM IR after LLVM's optimisation"), h("pre", { class: "mono", tabindex: 0 }, k.llvm_ir)));
        const block = h("details", { class: "asm-kernel", open: ev.kernels.length <= 4 }, ...parts);
        block.addEventListener("mouseenter", () => this.onLine(lines[0] ?? null));
        block.addEventListener("mouseleave", () => this.onLine(null));
        section.append(block);
      }
      this.root.append(section);
    }
  }
}
