// Memory: the compiled module's peak, the timeline of bytes live over XLA's schedule
// (memory_timeline.ts: hover a band, its line lights up) beside the buffers XLA
// assigned (argument, output, temporary), biggest first, each with its code line.
import { clear, h } from "../util/dom";
import { fmtBytes } from "../util/format";
import type { EventOf } from "../connection/protocol";
import { drawTimeline, timelineLines } from "./memory_timeline";
import { PerPipelinePane } from "./pane";

/** A compile for a target device (tpu_topology, gpu_target): the peak against the memory
 * one device has (`capacity_bytes`), and whether it fits. */
function capacity(ev: EventOf<"memory">): HTMLElement | null {
  if (ev.capacity_bytes == null) return null;
  const on = ev.device_kind ? ` on ${ev.device_kind}` : "";
  const peak = ev.peak_bytes ?? null;
  const percent = peak !== null && ev.capacity_bytes > 0 ? (100 * peak) / ev.capacity_bytes : null;
  const share = percent === null ? "" : percent < 0.01 ? " (under 0.01%)" : ` (${percent.toFixed(2)}%)`;
  const fits = peak === null ? "" : peak <= ev.capacity_bytes ? " · fits in its memory" : " · does not fit in its memory";
  return h("span", { class: peak !== null && peak > ev.capacity_bytes ? "memory-capacity over" : "memory-capacity", "data-testid": "memory-capacity" }, ` of ${fmtBytes(ev.capacity_bytes)}${on}${share}${fits}`);
}

/** Beside a deviceless TPU compile's figures: how close such figures were measured to
 * be on a real chip (issue 50; docs/deploy.md, "Deviceless, measured on a chip"). */
export function devicelessNote(ev: Pick<EventOf<"memory">, "capacity_bytes" | "device_kind">): string | null {
  if (ev.capacity_bytes == null || !(ev.device_kind ?? "").startsWith("TPU")) return null;
  return "Compiled without the TPU. Measured on a TPU v5e: for the same program (the same mesh), a deviceless compile's peak, live ranges, FLOPs and bytes were the chip's own, to the byte, for 20 programs from 1 KiB to 38 MB; the chip's allocator sees arguments, outputs and code, not XLA's temporaries.";
}

export class MemoryPane extends PerPipelinePane<"memory"> {
  readonly consumes = ["memory"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number | null) => void,
  ) {
    super(root);
    this.render();
  }

  codeLines(): Set<number> {
    const lines = new Set<number>();
    for (const ev of this.events.values()) {
      for (const b of ev.buffers) if (b.line != null) lines.add(b.line);
      if (ev.timeline) for (const l of timelineLines(ev.timeline)) lines.add(l);
    }
    return lines;
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No memory view in this run." : "Waiting for the memory view…"));
      return;
    }
    // compare mode: the pipelines side by side (two checkpoint policies, say)
    const row = h("div", { class: "memory-columns" });
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (!ev) continue;
      const biggest = Math.max(1, ...ev.buffers.map((b) => b.bytes));
      const rows = [...ev.buffers].sort((a, b) => b.bytes - a.bytes).map((b) => {
        const tr = h(
          "tr",
          { class: `mem-${b.kind}` },
          h("td", { class: "num" }, fmtBytes(b.bytes)),
          h("td", {}, h("span", { class: "mem-bar", style: `width:${((100 * b.bytes) / biggest).toFixed(1)}%` })),
          h("td", {}, b.kind),
          h("td", { class: "mono" }, `${b.dtype}[${b.shape.join(",")}]`),
          h("td", { class: "mono" }, b.name ?? ""),
          h("td", { class: "num" }, b.line != null ? String(b.line) : "—"),
        );
        tr.addEventListener("mouseenter", () => this.onLine(b.line ?? null));
        tr.addEventListener("mouseleave", () => this.onLine(null));
        return tr;
      });
      const analysis = Object.entries(ev.analysis ?? {}).filter(([, v]) => v);
      row.append(
        h(
          "section",
          { class: "memory-pipeline" },
          this.pipelines.length > 1 ? h("h3", {}, this.labels[p] ?? p) : null,
          h("p", { class: "memory-peak" }, "peak ", h("strong", { "data-testid": "memory-peak" }, fmtBytes(ev.peak_bytes ?? null)), " (memory_analysis())", capacity(ev)),
          ...(ev.notes ?? []).map((n) => h("p", { class: "pane-note" }, n)),
          devicelessNote(ev) ? h("p", { class: "pane-note", "data-testid": "memory-deviceless" }, devicelessNote(ev)) : null,
          h(
            "div",
            { class: "memory-split" },
            ev.timeline ? drawTimeline(ev.timeline, this.onLine) : null,
            h("div", { class: "memory-buffers" }, h("h4", {}, "buffers XLA assigned"), h("table", { class: "memory" }, h("thead", {}, h("tr", {}, ...["bytes", "", "kind", "shape", "HLO value", "line"].map((t) => h("th", {}, t)))), h("tbody", {}, ...rows))),
          ),
          analysis.length ? h("p", { class: "memory-analysis" }, "memory_analysis(): ", analysis.map(([k, v]) => `${k} ${fmtBytes(v)}`).join(" · ")) : null,
        ),
      );
    }
    this.root.append(row);
  }
}
