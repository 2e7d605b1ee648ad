// The Graph tab's renderer for big graphs: one <canvas> the size of the view, drawn
// from a Scene (graph/scene.ts) through a pan/zoom transform, only what intersects the
// view, text only where it is readable. Thousands of nodes cost one draw of a few
// milliseconds, no DOM node each (an SVG of 800 HLO nodes and their edges was
// ~10,000 elements). Hover, click and the colour bands work as on the SVG: the pane
// (panes/graph.ts) is told which node is under the pointer.
import type { Scene, SceneNode } from "./scene";
import { CHAR_W, DETAIL_CHARS } from "./sizes";

export interface CanvasHooks {
  /** the pointer is over `node` (null: over none) */
  hover(node: SceneNode | null, e: MouseEvent): void;
  /** a click on `node`; on a group's title strip: `onTitle` */
  click(node: SceneNode, onTitle: boolean): void;
}

export interface Marks {
  /** out line -> code line of the text this scene was read from */
  sources: Map<number, number>;
  linked: number | null;
  pinned: number | null;
  /** nodes a search found, and the one it is at */
  found: Set<string>;
  current: string | null;
}

const BAND_COUNT = 8;
const MIN_SCALE = 0.02;
const MAX_SCALE = 4;
/** below this zoom, labels are not drawn */
const READABLE = 0.45;

interface Palette {
  bg: string;
  fg: string;
  fg2: string;
  border: string;
  linked: string;
  accent: string;
  bands: string[];
  bandAlpha: number;
}

/** The page's colours (style.css's variables, light or dark), read once per draw setup. */
function palette(host: HTMLElement): Palette {
  const css = getComputedStyle(host);
  const v = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
  const bands: string[] = [];
  for (let i = 0; i < BAND_COUNT; i++) {
    const probe = document.createElement("span");
    probe.className = `band-${i}`;
    probe.hidden = true;
    host.append(probe);
    bands.push(getComputedStyle(probe).getPropertyValue("--band").trim() || "#888");
    probe.remove();
  }
  return { bg: v("--bg", "#fff"), fg: v("--fg", "#000"), fg2: v("--fg2", "#555"), border: v("--border", "#ccc"), linked: v("--linked", "rgba(255,196,0,.55)"), accent: v("--accent", "#2f5fc4"), bands, bandAlpha: Number(v("--band-alpha", "0.16")) || 0.16 };
}

export class GraphCanvas {
  readonly el: HTMLCanvasElement;
  private readonly ctx: CanvasRenderingContext2D;
  private scale = 1;
  private tx = 0;
  private ty = 0;
  private queued = false;
  private colours: Palette;
  private drag: { x: number; y: number; tx: number; ty: number; moved: boolean } | null = null;
  private hovered: SceneNode | null = null;
  private readonly resize: ResizeObserver;
  /** how long the last draw took (ms), for tests and the benchmark */
  lastDrawMs = 0;

  constructor(
    readonly host: HTMLElement,
    private scene: Scene,
    private marks: Marks,
    private readonly hooks: CanvasHooks,
    label: string,
  ) {
    this.el = document.createElement("canvas");
    this.el.className = "graph-canvas";
    this.el.setAttribute("role", "img");
    this.el.setAttribute("aria-label", label);
    this.el.tabIndex = 0;
    host.append(this.el);
    this.ctx = this.el.getContext("2d")!;
    this.colours = palette(host);
    this.fitWidth();
    this.resize = new ResizeObserver(() => this.redraw());
    this.resize.observe(host);
    this.el.addEventListener("wheel", (e) => this.onWheel(e), { passive: false });
    this.el.addEventListener("pointerdown", (e) => {
      this.drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, moved: false };
      this.el.setPointerCapture(e.pointerId);
    });
    this.el.addEventListener("pointermove", (e) => this.onMove(e));
    this.el.addEventListener("pointerup", (e) => {
      const d = this.drag;
      this.drag = null;
      if (d && !d.moved) {
        const hit = this.hit(e);
        if (hit) this.hooks.click(hit.node, hit.onTitle);
      }
    });
    this.el.addEventListener("pointerleave", (e) => {
      if (this.drag) return;
      this.hovered = null;
      this.hooks.hover(null, e);
    });
    this.el.addEventListener("keydown", (e) => this.onKey(e));
  }

  /** A new scene (a group opened or closed, a new run): the view stays where it was. */
  setScene(scene: Scene): void {
    this.scene = scene;
    this.hovered = null;
    this.redraw();
  }

  setMarks(marks: Marks): void {
    this.marks = marks;
    this.redraw();
  }

  destroy(): void {
    this.resize.disconnect();
    this.el.remove();
  }

  /** The nodes `ids` in view, centred, at most at scale 1; when they cannot all be
   * shown readably (a code line of a 1,000-layer loop has thousands), the first of
   * them. Returns the node centred on, or null when none is drawn. */
  focus(ids: Set<string>): string | null {
    const hits = this.scene.nodes.filter((n) => ids.has(n.id));
    if (hits.length === 0) return null;
    const { width, height } = this.size();
    const box = (ns: SceneNode[]) => {
      const b = { x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity };
      for (const n of ns) {
        b.x0 = Math.min(b.x0, n.x);
        b.y0 = Math.min(b.y0, n.y);
        b.x1 = Math.max(b.x1, n.x + n.width);
        b.y1 = Math.max(b.y1, n.y + n.height);
      }
      return { ...b, scale: Math.min(1, (width - 40) / Math.max(1, b.x1 - b.x0), (height - 40) / Math.max(1, b.y1 - b.y0)) };
    };
    let b = box(hits);
    if (b.scale < READABLE) b = box([hits[0]!]);
    this.scale = clamp(b.scale, MIN_SCALE, MAX_SCALE);
    this.tx = width / 2 - ((b.x0 + b.x1) / 2) * this.scale;
    this.ty = height / 2 - ((b.y0 + b.y1) / 2) * this.scale;
    this.redraw();
    return hits[0]!.id;
  }

  /** The whole graph in view. */
  fit(): void {
    const { width, height } = this.size();
    this.scale = clamp(Math.min((width - 20) / this.scene.width, (height - 20) / this.scene.height, 1), MIN_SCALE, MAX_SCALE);
    this.tx = (width - this.scene.width * this.scale) / 2;
    this.ty = 10;
    this.redraw();
  }

  zoomBy(factor: number): void {
    const { width, height } = this.size();
    this.zoomAt(width / 2, height / 2, factor);
  }

  /** The graph's top, its width in view (a deep graph is read from the top down). */
  private fitWidth(): void {
    const { width } = this.size();
    this.scale = clamp(Math.min(1, (width - 20) / Math.max(1, this.scene.width)), 0.25, MAX_SCALE);
    this.tx = Math.max(10, (width - this.scene.width * this.scale) / 2);
    this.ty = 10;
  }

  private size(): { width: number; height: number } {
    return { width: this.host.clientWidth || 800, height: this.host.clientHeight || 600 };
  }

  private zoomAt(sx: number, sy: number, factor: number): void {
    const scale = clamp(this.scale * factor, MIN_SCALE, MAX_SCALE);
    this.tx = sx - ((sx - this.tx) * scale) / this.scale;
    this.ty = sy - ((sy - this.ty) * scale) / this.scale;
    this.scale = scale;
    this.redraw();
  }

  private onWheel(e: WheelEvent): void {
    e.preventDefault();
    const r = this.el.getBoundingClientRect();
    if (e.ctrlKey || e.metaKey) this.zoomAt(e.clientX - r.left, e.clientY - r.top, Math.exp(-e.deltaY * 0.002));
    else {
      this.tx -= e.shiftKey ? e.deltaY : e.deltaX;
      this.ty -= e.shiftKey ? 0 : e.deltaY;
      this.redraw();
    }
  }

  private onKey(e: KeyboardEvent): void {
    const step = 60;
    const moves: Record<string, () => void> = {
      ArrowUp: () => (this.ty += step),
      ArrowDown: () => (this.ty -= step),
      ArrowLeft: () => (this.tx += step),
      ArrowRight: () => (this.tx -= step),
      PageUp: () => (this.ty += this.size().height * 0.9),
      PageDown: () => (this.ty -= this.size().height * 0.9),
      "+": () => this.zoomBy(1.25),
      "=": () => this.zoomBy(1.25),
      "-": () => this.zoomBy(0.8),
      "0": () => this.fit(),
    };
    const move = moves[e.key];
    if (!move) return;
    e.preventDefault();
    move();
    this.redraw();
  }

  private onMove(e: PointerEvent): void {
    const d = this.drag;
    if (d) {
      const dx = e.clientX - d.x;
      const dy = e.clientY - d.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) d.moved = true;
      if (d.moved) {
        this.tx = d.tx + dx;
        this.ty = d.ty + dy;
        this.redraw();
      }
      return;
    }
    const hit = this.hit(e)?.node ?? null;
    this.el.style.cursor = hit ? "pointer" : "grab";
    if (hit !== this.hovered || hit) {
      this.hovered = hit;
      this.hooks.hover(hit, e);
    }
  }

  /** The innermost node under the pointer (contents are after their group). */
  private hit(e: MouseEvent): { node: SceneNode; onTitle: boolean } | null {
    const r = this.el.getBoundingClientRect();
    const x = (e.clientX - r.left - this.tx) / this.scale;
    const y = (e.clientY - r.top - this.ty) / this.scale;
    const nodes = this.scene.nodes;
    for (let i = nodes.length - 1; i >= 0; i--) {
      const n = nodes[i]!;
      if (x >= n.x && x <= n.x + n.width && y >= n.y && y <= n.y + n.height) return { node: n, onTitle: !n.open || y <= n.y + 24 };
    }
    return null;
  }

  /** Where a node is on screen (CSS px from the canvas's corner), for tests. */
  screenBox(id: string): { x: number; y: number; width: number; height: number } | null {
    const n = this.scene.nodes.find((m) => m.id === id);
    if (!n) return null;
    return { x: n.x * this.scale + this.tx, y: n.y * this.scale + this.ty, width: n.width * this.scale, height: n.height * this.scale };
  }

  redraw(): void {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => {
      this.queued = false;
      this.draw();
    });
  }

  private draw(): void {
    const t0 = performance.now();
    const { width, height } = this.size();
    const dpr = window.devicePixelRatio || 1;
    if (this.el.width !== Math.round(width * dpr) || this.el.height !== Math.round(height * dpr)) {
      this.el.width = Math.round(width * dpr);
      this.el.height = Math.round(height * dpr);
      this.el.style.width = `${width}px`;
      this.el.style.height = `${height}px`;
    }
    const c = this.ctx;
    const k = this.scale;
    const P = this.colours;
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    c.fillStyle = P.bg;
    c.fillRect(0, 0, width, height);
    c.setTransform(dpr * k, 0, 0, dpr * k, dpr * this.tx, dpr * this.ty);
    // the view in the graph's coordinates
    const vx0 = -this.tx / k;
    const vy0 = -this.ty / k;
    const vx1 = vx0 + width / k;
    const vy1 = vy0 + height / k;
    const { nodes, points, starts } = this.scene;
    // edges first, under the nodes: one path
    c.beginPath();
    for (let i = 0; i + 1 < starts.length; i++) {
      const a = starts[i]!;
      const b = starts[i + 1]!;
      let ex0 = Infinity;
      let ey0 = Infinity;
      let ex1 = -Infinity;
      let ey1 = -Infinity;
      for (let p = a; p < b; p++) {
        const x = points[2 * p]!;
        const y = points[2 * p + 1]!;
        if (x < ex0) ex0 = x;
        if (x > ex1) ex1 = x;
        if (y < ey0) ey0 = y;
        if (y > ey1) ey1 = y;
      }
      if (ex1 < vx0 || ex0 > vx1 || ey1 < vy0 || ey0 > vy1) continue;
      c.moveTo(points[2 * a]!, points[2 * a + 1]!);
      for (let p = a + 1; p < b; p++) c.lineTo(points[2 * p]!, points[2 * p + 1]!);
    }
    c.strokeStyle = P.fg2;
    c.globalAlpha = 0.55;
    c.lineWidth = Math.max(1, 1.2 / k) * (k < 0.2 ? 0.5 : 1);
    c.stroke();
    c.globalAlpha = 1;
    const text = k >= READABLE;
    c.font = "600 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
    c.textBaseline = "alphabetic";
    const { sources, linked, pinned, found, current } = this.marks;
    const noBands = document.body.classList.contains("no-bands");
    for (const n of nodes) {
      if (n.x > vx1 || n.x + n.width < vx0 || n.y > vy1 || n.y + n.height < vy0) continue;
      const code = n.outLine !== null ? sources.get(n.outLine) : undefined;
      const band = code !== undefined && !noBands ? P.bands[(code - 1) % BAND_COUNT]! : null;
      const isLinked = code !== undefined && code === linked;
      const isPinned = code !== undefined && code === pinned;
      if (n.open) {
        c.fillStyle = band ?? P.fg2;
        c.globalAlpha = isLinked ? 0.2 : 0.06;
        c.fillRect(n.x, n.y, n.width, n.height);
        c.globalAlpha = 1;
      } else {
        c.fillStyle = P.bg;
        c.fillRect(n.x, n.y, n.width, n.height);
        if (band || isLinked) {
          c.fillStyle = isLinked ? P.linked : band!;
          c.globalAlpha = isLinked ? 1 : P.bandAlpha * 1.5;
          c.fillRect(n.x, n.y, n.width, n.height);
          c.globalAlpha = 1;
        }
      }
      const isFound = found.has(n.id);
      c.strokeStyle = n.id === current || isFound ? P.accent : (band ?? P.border);
      c.lineWidth = (n.id === current ? 4 : isPinned || isLinked || isFound ? 2.5 : 1.2) / Math.min(1, Math.max(k, 0.25));
      c.setLineDash(n.open || n.kind === "input" || n.kind === "output" ? [4, 3] : []);
      c.strokeRect(n.x, n.y, n.width, n.height);
      c.setLineDash([]);
      if (!text) continue;
      const title = n.kind === "group" ? `${n.collapsed ? "▸" : "▾"} ${n.label}` : n.label;
      c.fillStyle = P.fg;
      c.font = "600 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
      c.fillText(title, n.x + 8, n.y + 15, n.width - 12);
      const detail = n.detail.length > DETAIL_CHARS ? `${n.detail.slice(0, DETAIL_CHARS - 1)}…` : n.detail;
      if (detail) {
        c.fillStyle = P.fg2;
        c.font = "11px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace";
        if (n.open) c.fillText(detail, n.x + 16 + title.length * CHAR_W, n.y + 15);
        else c.fillText(detail, n.x + 8, n.y + 29, n.width - 12);
      }
    }
    this.lastDrawMs = performance.now() - t0;
  }
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}
