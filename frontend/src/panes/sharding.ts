// Sharding: each argument's and output's blocks drawn over its shape (a colour per
// device, the device ids in each block), and the collectives XLA put in the
// per-device HLO, each linked to the code line that caused it and to the shardings
// that forced it (Shardy's origins: from what the data had, to what it is taken to);
// XLA's involuntary full rematerializations at their lines.
import { clear, h, svg } from "../util/dom";
import { collectiveRows, deviceColour, formatSpec, gridCells, rematerializationRows, type OriginView, type ShardedArray, type ShardingEvent } from "../model/sharding-studio";
import { PerPipelinePane } from "./pane";

const WIDTH = 220;

export class ShardingPane extends PerPipelinePane<"sharding"> {
  readonly consumes = ["sharding"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
    /** the entry's parameter names, to call arguments by them */
    private readonly params: () => string[] = () => [],
  ) {
    super(root);
    this.render();
  }

  badge(): string {
    const n = [...this.events.values()].reduce((sum, e) => sum + e.collectives.length, 0);
    return this.events.size ? String(n) : "";
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No sharding: set a mesh under “sharding” (left) and run again." : "Waiting for the shardings…"));
      return;
    }
    for (const [pipeline, event] of this.events) {
      const section = h("section", { class: "sharding", "data-pipeline": pipeline });
      if (this.events.size > 1) section.append(h("h3", {}, this.labels[pipeline] ?? pipeline));
      section.append(h("p", { class: "pane-note" }, `${event.devices} device${event.devices === 1 ? "" : "s"}; each colour is one device, each block says which devices hold it.`));
      const arrays = h("div", { class: "sharding-arrays" });
      const params = this.params();
      for (const a of event.arguments) arrays.append(this.array(argumentName(a.path, params), a, event.devices));
      for (const a of event.outputs) arrays.append(this.array(`output ${a.path || ""}`, a, event.devices));
      section.append(arrays, this.collectives(event));
      const remats = this.rematerializations(event);
      if (remats) section.append(remats);
      this.root.append(section);
    }
  }

  private array(title: string, array: ShardedArray, devices: number): HTMLElement {
    const shape = array.shape;
    const rows = shape.length >= 2 ? shape[0]! : 1;
    const cols = shape.length >= 2 ? shape[1]! : (shape[0] ?? 1);
    // keep the drawing's proportions near the array's, within reason
    const height = Math.max(24, Math.min(WIDTH, Math.round((WIDTH * rows) / Math.max(cols, 1))));
    const drawing = svg("svg", { viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height, role: "img", "aria-label": `${title}: ${array.grid.length} blocks` });
    for (const cell of gridCells(array)) {
      const x = cell.x * WIDTH;
      const y = cell.y * height;
      const w = cell.w * WIDTH;
      const hgt = cell.h * height;
      if (cell.devices.length === 1) {
        drawing.append(svg("rect", { x, y, width: w, height: hgt, fill: deviceColour(cell.devices[0]!, devices) }));
      } else {
        // a block several devices hold (replicated): a neutral block with a band of
        // its devices' colours along its bottom, so it never reads as several blocks
        const band = Math.min(hgt * 0.3, 14);
        const stripe = w / cell.devices.length;
        drawing.append(svg("rect", { x, y, width: w, height: hgt, class: "sharding-replicated" }));
        cell.devices.forEach((d, k) => drawing.append(svg("rect", { x: x + k * stripe, y: y + hgt - band, width: stripe, height: band, fill: deviceColour(d, devices) })));
      }
      drawing.append(svg("rect", { x, y, width: w, height: hgt, fill: "none", stroke: "currentColor", "stroke-width": 1 }, svg("title", {}, `${cell.label} on device${cell.devices.length > 1 ? "s" : ""} ${cell.devices.join(", ")}`)));
      const text = svg("text", { x: x + w / 2, y: y + hgt / 2, "text-anchor": "middle", "dominant-baseline": "middle", class: cell.devices.length === 1 ? "sharding-devices" : "sharding-devices replicated" });
      text.textContent = cell.devices.join(",");
      drawing.append(text);
    }
    const spec = array.spec === null || array.spec === undefined ? array.sharding : formatSpec(array.spec);
    return h("figure", { class: "sharding-array" }, drawing, h("figcaption", {}, h("strong", {}, title), " ", h("code", {}, `${array.dtype}[${shape.join(",")}]`), " ", h("code", {}, spec)));
  }

  private collectives(event: ShardingEvent): HTMLElement {
    const { rows, total } = collectiveRows(event);
    if (rows.length === 0) return h("p", { class: "pane-note" }, "No collectives: every device computes its blocks from its own data.");
    const body = h("tbody");
    for (const r of rows) {
      const line = r.line;
      const at = line !== null ? h("button", { type: "button", class: "linklike", onclick: () => this.onLine(line) }, `line ${line}`) : h("span", { title: r.why }, "—");
      const why = !r.origin
        ? h("td", { title: event.origins_note ?? "" }, "—")
        : r.origin.written
          ? h("td", { class: "collective-origin" }, "the code's own (a collective it calls, as lax.psum in a shard_map): no sharding forced it")
          : h("td", { class: "collective-origin" }, this.side("from", r.origin.from), " → ", this.side("to", r.origin.to));
      body.append(h("tr", {}, h("td", {}, h("code", {}, r.kind)), h("td", { class: "num" }, r.bytes), h("td", {}, h("code", {}, r.groups)), h("td", {}, at), why, h("td", { class: "num" }, String(r.hloLine))));
    }
    const table = h(
      "table",
      { class: "collectives" },
      h("caption", {}, `Collectives in the compiled per-device HLO: ${rows.length}, ${total} per device`),
      h("thead", {}, h("tr", {}, h("th", {}, "kind"), h("th", {}, "bytes"), h("th", {}, "device groups"), h("th", {}, "code"), h("th", { title: "Shardy's sharding origins: the shardings the data had → the one it is taken to" }, "which sharding forced it"), h("th", {}, "HLO line"))),
      body,
    );
    if (!event.origins_note) return table;
    return h("div", {}, table, h("p", { class: "pane-note origins-note" }, `Origins not reported: ${event.origins_note}.`));
  }

  /** One side of a collective's origin: each sharding with a button to its line. */
  private side(label: string, views: readonly OriginView[]): HTMLElement {
    const out = h("span", { class: "origin-side" }, h("span", { class: "origin-label" }, `${label} `));
    if (views.length === 0) out.append(h("span", { title: label === "to" ? "no user sharding asks for the new layout: the operation needs it so" : "" }, "—"));
    views.forEach((v, k) => {
      if (k) out.append("; ");
      out.append(`${v.label} `, h("code", { title: v.axes ? `mesh axes: ${v.axes}` : "" }, v.sharding));
      const line = v.line;
      if (line !== null) out.append(" ", h("button", { type: "button", class: "linklike", onclick: () => this.onLine(line) }, `line ${line}`));
    });
    return out;
  }

  private rematerializations(event: ShardingEvent): HTMLElement | null {
    const rows = rematerializationRows(event);
    if (rows.length === 0) return null;
    const list = h("ul", { class: "remats" });
    for (const r of rows) {
      const line = r.line;
      const at = line !== null ? h("button", { type: "button", class: "linklike", onclick: () => this.onLine(line) }, `line ${line}`) : h("span", {}, "—");
      list.append(h("li", { title: r.message }, at, " ", h("code", {}, r.opName || "?"), ": from ", h("code", {}, r.from), " to ", h("code", {}, r.to)));
    }
    return h(
      "section",
      { class: "remarks-remat" },
      h("h4", {}, `Involuntary full rematerialization${rows.length === 1 ? "" : "s"} (XLA's warning): ${rows.length}`),
      h("p", { class: "pane-note" }, "No collective takes the value from one sharding to the other, so XLA copies all of it to every device and slices it again: its memory and traffic are the whole array's."),
      list,
    );
  }
}

/** `[1]['w']` of parameters (x, params) is `params['w']`; without names, `argument [1]['w']`. */
export function argumentName(path: string, params: readonly string[]): string {
  const m = /^\[(\d+)\]/.exec(path);
  const name = m ? params[Number(m[1])] : undefined;
  return name ? `${name}${path.slice(m![0].length)}` : `argument ${path}`;
}
