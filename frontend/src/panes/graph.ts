// The Graph tab: the jaxpr or the optimised HLO as a data-flow graph, nested jaxprs and
// HLO fusions/loops as groups that collapse to one node. Reading the text and laying
// it out happen in a worker (graph/worker.ts), never in the page's thread (issue 32).
// Small graphs (ELK's layout, ≤ ELK_LIMIT drawn nodes) are drawn as SVG, one focusable
// element per node; big ones on a canvas (graph/canvas.ts) that draws only what is in
// view. Either way nodes carry their code line's colour band; hovering one links it to
// the code and the text panes (and shows its documentation), clicking pins that link;
// a search box finds nodes (opening the groups that hold them) and "zoom to line"
// shows the nodes of the pinned code line. In compare mode the two pipelines sit side
// by side.
import { clear, h, svg } from "../util/dom";
import { GraphCanvas } from "../graph/canvas";
import { layOut, warmUp, type Laid } from "../graph/client";
import type { IndexEntry, Scene, SceneNode } from "../graph/scene";
import { CHAR_W, DETAIL_CHARS } from "../graph/sizes";
import { bandOf, sourceMap } from "../editor/linking";
import { docFor, docElement } from "../editor/opdocs";
import type { RunEvent, Sources } from "../connection/protocol";
import type { OutputPane } from "./pane";

export type GraphSource = "jaxpr" | "hlo";

interface Text {
  text: string;
  sources: Map<number, number>;
}

/** One pipeline's drawing: its scene and the renderer that shows it. */
interface Column {
  pipeline: string;
  laid: Laid;
  text: Text;
  canvas: GraphCanvas | null;
  svg: SVGElement | null;
}

export class GraphPane implements OutputPane {
  readonly consumes = ["jaxpr", "hlo"] as const;
  private texts = new Map<string, Text>(); // `${source}:${pipeline}`
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  source: GraphSource = "jaxpr";
  private toggled = new Set<string>(); // groups the user opened or closed
  private collapseAll: boolean | null = null; // "expand all" / "collapse all" pressed
  private visible = false;
  private generation = 0;
  private linked: number | null = null;
  private pinned: number | null = null;
  private columns: Column[] = [];
  /** the last layout's times, for tests and benchmarks/page/page_scale.py */
  private timing = { parseMs: 0, layoutMs: 0, receiveMs: 0, totalMs: 0 };
  private found: { entries: IndexEntry[]; at: number } = { entries: [], at: -1 };
  /** the node last brought into view (search, zoom to line) */
  private focused: string | null = null;
  private readonly note: HTMLElement;
  private readonly body: HTMLElement;
  private readonly tip: HTMLElement;
  private readonly buttons: Record<GraphSource, HTMLButtonElement>;
  private readonly search: HTMLInputElement;
  private readonly searchNote: HTMLElement;
  private readonly toLine: HTMLButtonElement;
  /** the render now drawn (a promise, for "draw then go to the found node") */
  private drawn: Promise<void> = Promise.resolve();

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
    this.search = h("input", { type: "search", class: "graph-search", placeholder: "find op…", "aria-label": "Find nodes in the graph", "data-testid": "graph-search" });
    this.search.addEventListener("input", () => this.find(this.search.value));
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        void this.next(e.shiftKey ? -1 : 1);
      }
    });
    this.searchNote = h("span", { class: "graph-bar-label", "aria-live": "polite", "data-testid": "graph-found" });
    this.toLine = h("button", { type: "button", disabled: true, title: "Show the nodes of the pinned code line", onclick: () => void (this.pinned !== null && this.zoomToLine(this.pinned)) }, "zoom to pinned line");
    this.note = h("p", { class: "pane-note", role: "status" });
    this.body = h("div", { class: "graph-body" });
    this.tip = h("div", { class: "graph-tip op-doc", role: "tooltip", hidden: true, id: "graph-tip" });
    root.append(
      h("div", { class: "graph-bar", role: "toolbar", "aria-label": "Graph" }, h("span", { class: "graph-bar-label" }, "show"), this.buttons.jaxpr, this.buttons.hlo, openAll, closeAll, this.search, this.searchNote, this.toLine),
      this.note,
      this.body,
      this.tip,
    );
    warmUp();
    this.render();
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.texts.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.render();
  }

  set(source: GraphSource, pipeline: string, text: string, sources: Sources | undefined): void {
    this.texts.set(`${source}:${pipeline}`, { text, sources: sourceMap(sources) });
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
    this.toLine.disabled = pinned === null;
    this.mark();
  }

  /** Nodes drawn now (all pipelines), for tests. */
  nodeCount(): number {
    return this.columns.reduce((n, c) => n + c.laid.scene.drawn, 0);
  }

  /** What is drawn and how, for tests and benchmarks/page/page_scale.py. */
  info(): { renderer: string[]; layout: string[]; drawn: number; total: number; parseMs: number; layoutMs: number; receiveMs: number; totalMs: number; found: number; current: { id: string; box: { x: number; y: number; width: number; height: number } | null; view: { width: number; height: number } } | null } {
    const cur = this.focused;
    const col = this.columns[0];
    return {
      renderer: this.columns.map((c) => (c.canvas ? "canvas" : "svg")),
      layout: this.columns.map((c) => c.laid.scene.layout),
      drawn: this.nodeCount(),
      total: this.columns.reduce((n, c) => n + c.laid.scene.total, 0),
      ...this.timing,
      found: this.found.entries.length,
      current: cur && col ? { id: cur, box: col.canvas?.screenBox(cur) ?? null, view: { width: col.canvas?.host.clientWidth ?? 0, height: col.canvas?.host.clientHeight ?? 0 } } : null,
    };
  }

  /** Opens the groups holding the nodes of code line `line` and brings them into view. */
  async zoomToLine(line: number): Promise<boolean> {
    const col = this.columns[0];
    if (!col) return false;
    const ids = new Set(col.laid.scene.index.filter((e) => e.outLine !== null && col.text.sources.get(e.outLine) === line).map((e) => e.id));
    if (ids.size === 0) return false;
    await this.reveal(col.laid.scene.index.filter((e) => ids.has(e.id)));
    return this.focusIds(ids);
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

  private render(): void {
    if (!this.visible) return;
    const generation = ++this.generation;
    const what = this.source === "jaxpr" ? "jaxpr" : "optimised HLO";
    const missing = this.pipelines.filter((p) => !this.texts.has(`${this.source}:${p}`));
    this.note.textContent = missing.length === this.pipelines.length ? `No ${what} yet: run the code.` : "";
    this.note.hidden = this.note.textContent === "";
    const wanted = this.pipelines.flatMap((p) => {
      const text = this.texts.get(`${this.source}:${p}`);
      return text ? [{ p, text }] : [];
    });
    const collapse = { collapseAll: this.collapseAll, toggled: [...this.toggled] };
    const t0 = performance.now();
    this.drawn = Promise.all(wanted.map(({ p, text }) => layOut(`${this.source}:${p}`, this.source, text.text, collapse).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))))).then((laid) => {
      if (generation !== this.generation) return; // a newer render started
      const r0 = performance.now();
      const old = new Map(this.columns.map((c) => [c.pipeline, c]));
      this.columns = [];
      clear(this.body);
      const notes = laid.flatMap((l) => (l instanceof Error || !l.scene.note ? [] : [l.scene.note]));
      if (notes.length) {
        this.note.textContent = notes[0]!;
        this.note.hidden = false;
      }
      this.body.classList.toggle("graph-compare", this.pipelines.length > 1);
      for (const [i, { p, text }] of wanted.entries()) {
        const l = laid[i]!;
        const big = !(l instanceof Error) && l.scene.layout === "layered";
        const col = h("div", { class: `graph-col${big ? " graph-col-canvas" : ""}`, "data-pipeline": p });
        if (this.pipelines.length > 1) col.append(h("div", { class: `graph-head ${this.pipelines.indexOf(p) === 0 ? "pipe-a" : "pipe-b"}` }, `${this.pipelines.indexOf(p) === 0 ? "A" : "B"}: ${this.labels[p] ?? p}`));
        this.body.append(col);
        if (l instanceof Error) {
          col.append(h("p", { class: "pane-note", "data-testid": "graph-problem" }, `Could not draw this ${what} as a graph: ${l.message}`));
          continue;
        }
        const column: Column = { pipeline: p, laid: l, text, canvas: null, svg: null };
        if (big) {
          const holder = h("div", { class: "graph-canvas-holder" });
          col.append(holder);
          const reuse = old.get(p)?.canvas;
          if (reuse) {
            holder.append(reuse.el);
            reuse.setScene(l.scene);
            column.canvas = reuse;
          } else column.canvas = new GraphCanvas(holder, l.scene, this.marks(text), this.canvasHooks(text), `${this.source} graph, ${l.scene.drawn} nodes`);
        } else {
          column.svg = this.drawSvg(l.scene, p, text);
          col.append(column.svg);
        }
        this.columns.push(column);
      }
      for (const c of old.values()) if (c.canvas && !this.columns.some((n) => n.canvas === c.canvas)) c.canvas.destroy();
      const first = laid.find((l): l is Laid => !(l instanceof Error));
      this.timing = { parseMs: first?.parseMs ?? 0, layoutMs: first?.layoutMs ?? 0, receiveMs: performance.now() - r0, totalMs: performance.now() - t0 };
      this.root.dataset.graphState = "drawn";
      this.find(this.search.value, false);
    });
    this.root.dataset.graphState = "laying-out";
  }

  private marks(text: Text) {
    const found = new Set<string>();
    const cur = this.found.entries[this.found.at];
    const drawn = new Map((this.columns[0]?.laid.scene.nodes ?? []).map((n) => [n.id, n]));
    // a node inside a collapsed group is found on the outermost collapsed group that holds it
    for (const e of this.found.entries) found.add(drawn.has(e.id) ? e.id : (e.groups.find((g) => drawn.get(g)?.collapsed) ?? e.id));
    return { sources: text.sources, linked: this.linked, pinned: this.pinned, found, current: cur ? cur.id : null };
  }

  /** The hovered and pinned lines and the search's finds, shown on every column. */
  private mark(): void {
    for (const c of this.columns) {
      if (c.canvas) c.canvas.setMarks(this.marks(c.text));
      else if (c.svg) {
        const m = this.marks(c.text);
        for (const el of c.svg.querySelectorAll<SVGGElement>("g.gnode")) {
          const line = Number(el.dataset.srcLine ?? NaN);
          el.classList.toggle("linked", line === m.linked);
          el.classList.toggle("pinned", line === m.pinned);
          const id = el.dataset.nodeId!;
          el.classList.toggle("found", m.found.has(id));
          el.classList.toggle("current", id === m.current);
        }
      }
    }
  }

  // --- search -------------------------------------------------------------------------

  /** Nodes of the first column whose op or label holds `query` (case-insensitive). */
  private find(query: string, restart = true): void {
    const q = query.trim().toLowerCase();
    const index = this.columns[0]?.laid.scene.index ?? [];
    const keep = this.found.entries[this.found.at]?.id;
    this.found.entries = q ? index.filter((e) => e.label.toLowerCase().includes(q) || (e.op ?? "").toLowerCase().includes(q)) : [];
    this.found.at = restart ? -1 : this.found.entries.findIndex((e) => e.id === keep);
    this.searchNote.textContent = !q ? "" : this.found.entries.length === 0 ? "none" : `${this.found.at + 1 || "–"} of ${this.found.entries.length}`;
    this.mark();
  }

  /** The next (or previous) node found, its groups opened, in view. */
  private async next(step: number): Promise<void> {
    const n = this.found.entries.length;
    if (n === 0) return;
    this.found.at = (((this.found.at + step) % n) + n) % n;
    const e = this.found.entries[this.found.at]!;
    this.searchNote.textContent = `${this.found.at + 1} of ${n}`;
    await this.reveal([e]);
    this.focusIds(new Set([e.id]));
  }

  /** Opens the groups that hold `entries` until they are drawn. */
  private async reveal(entries: IndexEntry[]): Promise<void> {
    for (let round = 0; round < 16; round++) {
      const scene = this.columns[0]?.laid.scene;
      if (!scene) return;
      const drawn = new Map(scene.nodes.map((n) => [n.id, n]));
      const open: string[] = [];
      for (const e of entries) {
        if (drawn.has(e.id)) continue;
        const closed = e.groups.find((g) => drawn.get(g)?.collapsed);
        if (closed) open.push(closed);
      }
      if (open.length === 0) return;
      for (const g of new Set(open)) {
        if (this.toggled.has(g)) this.toggled.delete(g);
        else this.toggled.add(g);
      }
      this.render();
      await this.drawn;
    }
  }

  private focusIds(ids: Set<string>): boolean {
    const col = this.columns[0];
    if (!col) return false;
    this.mark();
    if (col.canvas) {
      this.focused = col.canvas.focus(ids);
      return this.focused !== null;
    }
    this.focused = col.laid.scene.nodes.find((n) => ids.has(n.id))?.id ?? null;
    const el = [...(col.svg?.querySelectorAll<SVGGElement>("g.gnode") ?? [])].find((g) => ids.has(g.dataset.nodeId!));
    el?.scrollIntoView({ block: "center", inline: "center" });
    return el !== undefined;
  }

  // --- drawing ------------------------------------------------------------------------

  private canvasHooks(text: Text) {
    return {
      hover: (node: SceneNode | null, e: MouseEvent) => {
        if (!node) {
          this.onHover(null);
          this.hideTip();
          return;
        }
        const code = node.outLine !== null ? (text.sources.get(node.outLine) ?? null) : null;
        this.onHover(code);
        this.showTip(node, code, lineOf(text.text, node.outLine), e);
      },
      click: (node: SceneNode, onTitle: boolean) => {
        if (node.kind === "group" && onTitle) this.toggle(node.id);
        else {
          const code = node.outLine !== null ? text.sources.get(node.outLine) : undefined;
          if (code !== undefined) this.onPin(code);
        }
      },
    };
  }

  private toggle(id: string): void {
    if (this.toggled.has(id)) this.toggled.delete(id);
    else this.toggled.add(id);
    this.render();
  }

  private drawSvg(scene: Scene, pipeline: string, text: Text): SVGElement {
    const marker = `arrow-${pipeline}`;
    const w = Math.ceil(scene.width);
    const hh = Math.ceil(scene.height);
    const root = svg(
      "svg",
      { class: "graph", width: w, height: hh, viewBox: `0 0 ${w} ${hh}`, role: "img", "aria-label": `${this.source} graph` },
      svg("defs", {}, svg("marker", { id: marker, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow" }))),
    );
    const { points, starts } = scene;
    for (let i = 0; i + 1 < starts.length; i++) {
      let d = "";
      for (let p = starts[i]!; p < starts[i + 1]!; p++) d += `${p === starts[i] ? "M" : " L"}${points[2 * p]!.toFixed(1)},${points[2 * p + 1]!.toFixed(1)}`;
      root.append(svg("path", { d, class: "gedge", "marker-end": `url(#${marker})` }));
    }
    for (const n of scene.nodes) {
      const code = n.outLine !== null ? text.sources.get(n.outLine) : undefined;
      const cls = ["gnode", `kind-${n.kind}`, n.open ? "open" : "", code !== undefined ? `band band-${bandOf(code)}` : ""].filter(Boolean).join(" ");
      const attrs: Record<string, string | number> = { class: cls, "data-node-id": n.id, "data-label": n.label };
      if (code !== undefined) attrs["data-src-line"] = code;
      if (n.outLine !== null) attrs["data-out-line"] = n.outLine;
      if (n.op) attrs["data-op"] = n.op;
      const g = svg("g", attrs);
      const rx = n.kind === "input" || n.kind === "output" ? 14 : 4;
      g.append(svg("rect", { x: n.x, y: n.y, width: n.width, height: n.height, rx }));
      const title = n.kind === "group" ? `${n.collapsed ? "▸" : "▾"} ${n.label}` : n.label;
      g.append(svg("text", { x: n.x + 8, y: n.y + 15, class: "glabel" }, title));
      const detail = n.detail.length > DETAIL_CHARS ? `${n.detail.slice(0, DETAIL_CHARS - 1)}…` : n.detail;
      if (detail) g.append(svg("text", { x: n.open ? n.x + 16 + title.length * CHAR_W : n.x + 8, y: n.open ? n.y + 15 : n.y + 29, class: "gdetail" }, detail));
      root.append(g);
      this.wire(g, n, code ?? null, lineOf(text.text, n.outLine));
    }
    return root;
  }

  private wire(g: SVGElement, node: SceneNode, code: number | null, lineText: string): void {
    if (node.kind === "group") {
      g.setAttribute("role", "button");
      g.setAttribute("tabindex", "0");
      g.setAttribute("aria-expanded", String(node.open));
      g.setAttribute("aria-label", `${node.label} ${node.detail}: ${node.open ? "collapse" : "expand"}`);
      const toggle = (): void => this.toggle(node.id);
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

  private showTip(node: SceneNode, code: number | null, lineText: string, e: MouseEvent): void {
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

/** Line `line` (1-based) of `text`, found without splitting the whole text. */
function lineOf(text: string, line: number | null): string {
  if (line === null) return "";
  let start = 0;
  for (let i = 1; i < line; i++) {
    start = text.indexOf("\n", start) + 1;
    if (start === 0) return "";
  }
  const end = text.indexOf("\n", start);
  return text.slice(start, end === -1 ? undefined : end);
}
