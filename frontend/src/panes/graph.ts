// The Graph tab: the jaxpr or the optimised HLO as a data-flow graph (laid out by
// elkjs), nested jaxprs and HLO fusions/loops as groups that collapse to one node.
// Nodes carry their code line's colour band; hovering one links it to the code and the
// text panes (and shows its documentation), clicking pins that link. In compare mode
// the two pipelines sit side by side.
import { clear, h, svg } from "../dom";
import { parseHlo } from "../graph/hlo";
import { parseJaxpr } from "../graph/jaxpr";
import { layoutGraph, type Laid, type Placed } from "../graph/layout";
import { countNodes, drawnNodes, type Graph, type GraphNode } from "../graph/model";
import { bandOf, sourceMap } from "../linking";
import { docFor, docElement } from "../opdocs";
import type { RunEvent, Sources } from "../protocol";
import type { OutputPane } from "./pane";

export type GraphSource = "jaxpr" | "hlo";

interface Text {
  text: string;
  sources: Map<number, number>;
}

/** Groups bigger than this start collapsed. */
const OPEN_LIMIT = 30;
/** Layout runs in the page's thread (about 2 s for 1,000 nodes on a slow machine):
 * past this many nodes the groups are drawn collapsed, and past it at the top level
 * the graph is not drawn at all (the text pane has it). */
const DRAW_LIMIT = 1200;

export class GraphPane implements OutputPane {
  readonly consumes = ["jaxpr", "hlo"] as const;
  private texts = new Map<string, Text>(); // `${source}:${pipeline}`
  private graphs = new Map<string, Graph | Error>();
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  source: GraphSource = "jaxpr";
  private toggled = new Set<string>(); // groups the user opened or closed
  private collapseAll: boolean | null = null; // "expand all" / "collapse all" pressed
  private visible = false;
  private generation = 0;
  private linked: number | null = null;
  private pinned: number | null = null;
  private readonly note: HTMLElement;
  private readonly body: HTMLElement;
  private readonly tip: HTMLElement;
  private readonly buttons: Record<GraphSource, HTMLButtonElement>;

  constructor(
    readonly root: HTMLElement,
    private readonly onHover: (codeLine: number | null) => void,
    private readonly onPin: (codeLine: number) => void,
    private readonly onSourceChange: () => void,
  ) {
    this.buttons = {
      jaxpr: h("button", { type: "button", "aria-pressed": "true", "data-graph-source": "jaxpr" }, "jaxpr"),
      hlo: h("button", { type: "button", "aria-pressed": "false", "data-graph-source": "hlo" }, "HLO (optimised)"),
    };
    for (const [s, b] of Object.entries(this.buttons)) b.addEventListener("click", () => this.setSource(s as GraphSource));
    const openAll = h("button", { type: "button", onclick: () => this.setAll(false) }, "expand all");
    const closeAll = h("button", { type: "button", onclick: () => this.setAll(true) }, "collapse all");
    this.note = h("p", { class: "pane-note", role: "status" });
    this.body = h("div", { class: "graph-body" });
    this.tip = h("div", { class: "graph-tip op-doc", role: "tooltip", hidden: true, id: "graph-tip" });
    root.append(
      h("div", { class: "graph-bar", role: "toolbar", "aria-label": "Graph" }, h("span", { class: "graph-bar-label" }, "show"), this.buttons.jaxpr, this.buttons.hlo, openAll, closeAll),
      this.note,
      this.body,
      this.tip,
    );
    this.render();
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.texts.clear();
    this.graphs.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.render();
  }

  set(source: GraphSource, pipeline: string, text: string, sources: Sources | undefined): void {
    this.texts.set(`${source}:${pipeline}`, { text, sources: sourceMap(sources) });
    this.graphs.delete(`${source}:${pipeline}`);
    if (source === this.source) this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === "jaxpr" || event.type === "hlo") this.set(event.type, pipeline, event.text, event.sources);
  }

  end(): void {}

  /** The tab was opened or closed: layout happens only while it is seen. */
  setVisible(on: boolean): void {
    this.visible = on;
    if (on) this.render();
    else this.hideTip();
  }

  /** The code line hovered elsewhere (or pinned), shown on the nodes from it. */
  setLinked(codeLine: number | null, pinned: number | null): void {
    this.linked = codeLine;
    this.pinned = pinned;
    for (const el of this.body.querySelectorAll<SVGGElement>("g.gnode")) {
      const line = Number(el.dataset.srcLine ?? NaN);
      el.classList.toggle("linked", line === codeLine);
      el.classList.toggle("pinned", line === pinned);
    }
  }

  /** Nodes drawn now, for tests: how many, per pipeline. */
  nodeCount(): number {
    return this.body.querySelectorAll("g.gnode").length;
  }

  private setSource(source: GraphSource): void {
    this.source = source;
    for (const [s, b] of Object.entries(this.buttons)) b.setAttribute("aria-pressed", String(s === source));
    this.onSourceChange();
    this.render();
  }

  private setAll(collapse: boolean): void {
    this.toggled.clear();
    this.collapseAll = collapse;
    this.render();
  }

  private graph(pipeline: string): Graph | Error | null {
    const key = `${this.source}:${pipeline}`;
    const t = this.texts.get(key);
    if (!t) return null;
    let g = this.graphs.get(key);
    if (!g) {
      try {
        g = this.source === "jaxpr" ? parseJaxpr(t.text) : parseHlo(t.text);
      } catch (e) {
        g = e instanceof Error ? e : new Error(String(e));
      }
      this.graphs.set(key, g);
    }
    return g;
  }

  private isCollapsed = (n: GraphNode): boolean => {
    const byDefault = this.collapseAll ?? countNodes(n.children ?? []) > OPEN_LIMIT;
    return this.toggled.has(n.id) ? !byDefault : byDefault;
  };

  private render(): void {
    if (!this.visible) return;
    const generation = ++this.generation;
    const what = this.source === "jaxpr" ? "jaxpr" : "optimised HLO";
    const missing = this.pipelines.filter((p) => !this.texts.has(`${this.source}:${p}`));
    this.note.textContent = missing.length === this.pipelines.length ? `No ${what} yet: run the code.` : "";
    this.note.hidden = this.note.textContent === "";
    const columns = this.pipelines.map((p) => ({ p, g: this.graph(p) }));
    const notes: string[] = [];
    void Promise.all(
      columns.map(async ({ g }) => {
        if (!g || g instanceof Error) return g;
        let collapsed = this.isCollapsed;
        if (drawnNodes(g.nodes, collapsed) > DRAW_LIMIT) {
          collapsed = () => true;
          notes.push(`${countNodes(g.nodes)} nodes: groups drawn collapsed to keep the page responsive.`);
        }
        if (drawnNodes(g.nodes, collapsed) > DRAW_LIMIT) {
          return new Error(`${g.nodes.length} nodes at the top level are too many to draw here (the limit is ${DRAW_LIMIT}); the text pane has them all`);
        }
        return await layoutGraph(g, collapsed);
      }),
    ).then((laid) => {
      if (generation !== this.generation) return; // a newer render started
      clear(this.body);
      if (notes.length) {
        this.note.textContent = notes[0]!;
        this.note.hidden = false;
      }
      this.body.classList.toggle("graph-compare", this.pipelines.length > 1);
      for (const [i, { p }] of columns.entries()) {
        const col = h("div", { class: "graph-col", "data-pipeline": p });
        if (this.pipelines.length > 1) col.append(h("div", { class: `graph-head ${i === 0 ? "pipe-a" : "pipe-b"}` }, `${i === 0 ? "A" : "B"}: ${this.labels[p] ?? p}`));
        const l = laid[i];
        if (l instanceof Error) col.append(h("p", { class: "pane-note", "data-testid": "graph-problem" }, `Could not draw this ${what} as a graph: ${l.message}`));
        else if (l) col.append(this.draw(l, p));
        this.body.append(col);
      }
      this.setLinked(this.linked, this.pinned);
    });
  }

  private draw(laid: Laid, pipeline: string): SVGElement {
    const { sources, text } = this.texts.get(`${this.source}:${pipeline}`)!;
    const ctx = { sources, lines: text.split("\n"), marker: `arrow-${pipeline}` };
    const marker = `arrow-${pipeline}`;
    const root = svg(
      "svg",
      { class: "graph", width: Math.ceil(laid.width), height: Math.ceil(laid.height), viewBox: `0 0 ${Math.ceil(laid.width)} ${Math.ceil(laid.height)}`, role: "img", "aria-label": `${this.source} graph` },
      svg("defs", {}, svg("marker", { id: marker, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow" }))),
    );
    this.drawLevel(root, laid.nodes, laid.edges, 0, 0, ctx);
    return root;
  }

  private drawLevel(parent: SVGElement, nodes: Placed[], edges: Placed["edges"], dx: number, dy: number, ctx: DrawContext): void {
    const { sources, marker } = ctx;
    for (const e of edges) {
      const d = e.points.map((pt, i) => `${i ? "L" : "M"}${(pt.x + dx).toFixed(1)},${(pt.y + dy).toFixed(1)}`).join(" ");
      parent.append(svg("path", { d, class: "gedge", "marker-end": `url(#${marker})` }));
    }
    for (const p of nodes) {
      const x = p.x + dx;
      const y = p.y + dy;
      const code = p.node.outLine !== null ? sources.get(p.node.outLine) : undefined;
      const open = p.node.kind === "group" && !p.collapsed;
      const cls = ["gnode", `kind-${p.node.kind}`, open ? "open" : "", code !== undefined ? `band band-${bandOf(code)}` : ""].filter(Boolean).join(" ");
      const attrs: Record<string, string | number> = { class: cls, "data-node-id": p.node.id, "data-label": p.node.label };
      if (code !== undefined) attrs["data-src-line"] = code;
      if (p.node.outLine !== null) attrs["data-out-line"] = p.node.outLine;
      if (p.node.op) attrs["data-op"] = p.node.op;
      const g = svg("g", attrs);
      const rx = p.node.kind === "input" || p.node.kind === "output" ? 14 : 4;
      g.append(svg("rect", { x, y, width: p.width, height: p.height, rx }));
      const title = p.node.kind === "group" ? `${p.collapsed ? "▸" : "▾"} ${p.node.label}` : p.node.label;
      g.append(svg("text", { x: x + 8, y: y + 15, class: "glabel" }, title));
      const detail = p.node.detail.length > 48 ? `${p.node.detail.slice(0, 47)}…` : p.node.detail;
      if (detail && !(open && !p.node.detail)) g.append(svg("text", { x: open ? x + 8 + title.length * 7.2 + 8 : x + 8, y: open ? y + 15 : y + 29, class: "gdetail" }, detail));
      parent.append(g);
      this.wire(g, p.node, code ?? null, p.node.outLine !== null ? (ctx.lines[p.node.outLine - 1] ?? "") : "");
      if (open) this.drawLevel(parent, p.children, p.edges, x, y, ctx);
    }
  }

  private wire(g: SVGElement, node: GraphNode, code: number | null, lineText: string): void {
    if (node.kind === "group") {
      g.setAttribute("role", "button");
      g.setAttribute("tabindex", "0");
      g.setAttribute("aria-expanded", String(!this.isCollapsed(node)));
      g.setAttribute("aria-label", `${node.label} ${node.detail}: ${this.isCollapsed(node) ? "expand" : "collapse"}`);
      const toggle = (): void => {
        if (this.toggled.has(node.id)) this.toggled.delete(node.id);
        else this.toggled.add(node.id);
        this.render();
      };
      g.addEventListener("dblclick", (e) => (e.stopPropagation(), toggle()));
      g.querySelector("text.glabel")!.addEventListener("click", (e) => (e.stopPropagation(), toggle()));
      g.addEventListener("keydown", (e) => {
        if ((e as KeyboardEvent).key === "Enter" || (e as KeyboardEvent).key === " ") {
          e.preventDefault();
          toggle();
        }
      });
    }
    g.addEventListener("mouseenter", (e) => {
      this.onHover(code);
      this.showTip(node, code, lineText, e as MouseEvent);
    });
    g.addEventListener("mouseleave", () => {
      this.onHover(null);
      this.hideTip();
    });
    g.addEventListener("click", (e) => {
      if (code === null) return;
      e.stopPropagation();
      this.onPin(code);
    });
  }

  private showTip(node: GraphNode, code: number | null, lineText: string, e: MouseEvent): void {
    const doc = node.op ? docFor(this.source, node.op) : null;
    clear(this.tip);
    if (doc) this.tip.append(docElement(doc));
    else this.tip.append(h("strong", {}, node.label));
    if (node.detail) this.tip.append(h("div", { class: "op-doc-detail" }, node.detail));
    if (lineText) this.tip.append(h("pre", { class: "op-doc-line" }, `${node.outLine}: ${lineText.trim()}`));
    if (code !== null) this.tip.append(h("div", { class: "op-doc-src" }, `from code line ${code} — click to pin`));
    this.tip.hidden = false;
    const box = this.root.getBoundingClientRect();
    this.tip.style.left = `${Math.min(e.clientX - box.left + 14, box.width - 340)}px`;
    this.tip.style.top = `${e.clientY - box.top + this.root.scrollTop + 14}px`;
  }

  private hideTip(): void {
    this.tip.hidden = true;
  }
}

interface DrawContext {
  sources: Map<number, number>;
  lines: string[];
  marker: string;
}
