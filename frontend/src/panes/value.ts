// Values and gradients: the pytree's leaves with path, dtype, shape, a summary and
// the first values; in compare mode the largest difference from pipeline A. A model's
// parameters (an nnx.State, a Linen variables dict, an Equinox module) read best as a
// tree: the leaves grouped by path prefix (panes/pytree.ts), each group with its parameters
// and bytes; a toggle switches between the tree and the flat table.
import { clear, h } from "../util/dom";
import { fmtAval, fmtNum } from "../util/format";
import type { EventOf, RunEvent, ValueLeaf } from "../connection/protocol";
import { buildTree, fmtBytes, fmtCount, parsePath, type TreeNode } from "./pytree";
import type { OutputPane } from "./pane";
import { missingData, valuePage, type ValuePage } from "./value-page";

export type ValueView = "tree" | "flat";

/** The view a value opens in: the tree when some leaf sits two or more keys deep
 * (a model's parameters), else the flat table (one array, a tuple of gradients). */
export function defaultView(leaves: readonly { path: string }[]): ValueView {
  return leaves.some((l) => parsePath(l.path).length >= 2) ? "tree" : "flat";
}

/** A group's line: its leaves, parameters and bytes. */
export function groupSummary(node: TreeNode): string {
  const leaves = `${node.leaves} ${node.leaves === 1 ? "leaf" : "leaves"}`;
  return `${fmtCount(node.params)} params · ${fmtBytes(node.bytes, node.bytesKnown)} · ${leaves}`;
}

/** Groups this deep or less start open. */
const OPEN_DEPTH = 2;

/** Rows drawn at once in a group or the flat table; the rest behind "show more". A
 * 1,000-layer model's gradient has 2,000 leaves: drawn whole, twice, it held the main
 * thread ~200 ms at the run's end. */
export const ROWS_AT_ONCE = 100;

/** `items` drawn into `into` a page at a time: the first ROWS_AT_ONCE, then a button
 * that draws the next page (and moves below it) until all are drawn. */
export function paged<T>(into: HTMLElement, items: readonly T[], draw: (item: T) => HTMLElement, wrapMore: (button: HTMLElement) => HTMLElement = (b) => b): HTMLElement {
  let shown = 0;
  let more: HTMLElement | null = null;
  const next = (): void => {
    const end = Math.min(items.length, shown + ROWS_AT_ONCE);
    const rows = items.slice(shown, end).map(draw);
    shown = end;
    more?.remove();
    more = null;
    into.append(...rows);
    if (shown < items.length) {
      const left = items.length - shown;
      more = wrapMore(h("button", { type: "button", class: "vt-more", onclick: next }, `show ${Math.min(left, ROWS_AT_ONCE)} more of ${left}`));
      into.append(more);
    }
  };
  next();
  return into;
}

function treeLeafRow(node: TreeNode<ValueLeaf>): HTMLElement {
  const leaf = node.leaf!;
  const s = leaf.summary;
  const bad = (s?.nan_count ?? 0) > 0 || (s?.inf_count ?? 0) > 0;
  const stats = s ? `min ${fmtNum(s.min)} · max ${fmtNum(s.max)} · mean ${fmtNum(s.mean)}${bad ? ` · NaN ${s.nan_count} / inf ${s.inf_count}` : ""}` : "";
  return h(
    "div",
    { class: bad ? "vt-leaf bad" : "vt-leaf", title: leaf.path || "(root)" },
    h("span", { class: "vt-label mono" }, node.label || "(root)"),
    h("span", { class: "vt-aval mono" }, fmtAval(leaf.dtype, leaf.shape)),
    h("span", { class: "vt-size" }, `${fmtCount(node.params)} · ${fmtBytes(node.bytes, node.bytesKnown)}`),
    h("span", { class: "vt-stats num" }, stats),
  );
}

/** A group: its children drawn when it is first open (a closed one draws nothing
 * until it is opened), a page at a time. */
function treeNode(node: TreeNode<ValueLeaf>, depth: number): HTMLElement {
  if (node.leaf) return treeLeafRow(node);
  const open = depth <= OPEN_DEPTH;
  const group = h(
    "details",
    { class: "vt-group", open, title: node.path },
    h("summary", {}, h("span", { class: "vt-label mono" }, node.label), h("span", { class: "vt-size" }, groupSummary(node))),
  );
  let drawn = false;
  const draw = (): void => {
    if (drawn) return;
    drawn = true;
    paged(group, node.children, (c) => treeNode(c, depth + 1));
  };
  if (open) draw();
  else group.addEventListener("toggle", () => group.open && draw());
  return group;
}

/** The leaves as a collapsible tree, the whole value's sums on top. */
export function valueTree(leaves: ValueLeaf[]): HTMLElement {
  const root = buildTree(leaves);
  const tree = h("div", { class: "value-tree" }, h("p", { class: "vt-total" }, `${groupSummary(root)} in all`));
  return paged(tree, root.children, (c) => treeNode(c, 1));
}

const PREVIEW = 12;

function preview(leaf: ValueLeaf, index: number, page: ValuePage | null): string {
  const data = leaf.data;
  if (!data) return missingData(index, page);
  const shown = data.slice(0, PREVIEW).map(fmtNum).join(", ");
  return data.length > PREVIEW ? `[${shown}, … ${data.length - PREVIEW} more]` : `[${shown}]`;
}

function maxAbsDiff(a: ValueLeaf | undefined, b: ValueLeaf): string | null {
  if (!a || !a.data || !b.data || a.data.length !== b.data.length) return null;
  if (a.sha256 && a.sha256 === b.sha256) return "identical bytes";
  let m = 0;
  for (let i = 0; i < a.data.length; i++) {
    const x = a.data[i];
    const y = b.data[i];
    if (typeof x !== "number" || typeof y !== "number") return null;
    m = Math.max(m, Math.abs(x - y));
  }
  return `max |A−B| = ${fmtNum(m)}`;
}

export class ValuePane implements OutputPane {
  readonly consumes = ["value"] as const;
  private values = new Map<string, EventOf<"value">>();
  private pipelines: string[] = ["main"];
  private labels: Record<string, string> = {};
  private ended = false;
  /** the view the reader picked (null: each value's default) */
  private view: ValueView | null = null;

  /** `askFrom`: runs the program again, its value described from this leaf (the
   * request's `value_from`); without it the page's words are said, with no buttons */
  constructor(
    readonly root: HTMLElement,
    private readonly askFrom?: (first: number) => void,
  ) {
    this.render();
  }

  /** The line that says which leaves the event holds, with its buttons. */
  private pageLine(page: ValuePage): HTMLElement {
    const ask = this.askFrom;
    const button = (label: string, testid: string, first: number | null): HTMLElement | null =>
      first === null || !ask ? null : h("button", { type: "button", class: "linklike", "data-testid": testid, onclick: () => ask(first) }, label);
    return h(
      "div",
      { class: "value-page pane-note", "data-testid": "value-page" },
      page.leaves ? h("span", {}, page.leaves, " ") : null,
      button("previous leaves", "value-previous", page.previous),
      " ",
      button("next leaves", "value-next", page.next),
      page.dataNote ? h("div", {}, page.dataNote, " ", button("show from there", "value-data-from", page.dataFrom)) : null,
    );
  }

  reset(pipelines: string[], labels: Record<string, string>): void {
    this.values.clear();
    this.pipelines = pipelines;
    this.labels = labels;
    this.ended = false;
    this.render();
  }

  set(pipeline: string, event: EventOf<"value">): void {
    this.values.set(pipeline, event);
    this.render();
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === "value") this.set(pipeline, event);
  }

  end(): void {
    this.ended = true;
    // only a pipeline still waiting for its value reads differently once the run ended
    if (this.pipelines.some((p) => !this.values.has(p))) this.render();
  }

  has(): boolean {
    return this.values.size > 0;
  }

  private render(): void {
    clear(this.root);
    const compare = this.pipelines.length > 1;
    const first = this.values.get(this.pipelines[0]!);
    for (const [i, p] of this.pipelines.entries()) {
      const value = this.values.get(p);
      const section = h("section", { class: "value-block", "data-pipeline": p });
      if (compare) section.append(h("h3", { class: i === 0 ? "pipe-a" : "pipe-b" }, `${i === 0 ? "A" : "B"}: ${this.labels[p] ?? p}`));
      if (!value) {
        section.append(h("p", { class: "pane-note" }, this.ended ? "No value: the run ended before it." : "Waiting for the value…"));
        this.root.append(section);
        continue;
      }
      const view = this.view ?? defaultView(value.tree);
      const toggle = h(
        "div",
        { class: "vt-toggle", role: "group", "aria-label": "value view" },
        (["tree", "flat"] as const).map((v) =>
          h("button", { type: "button", "aria-pressed": String(view === v), onclick: () => ((this.view = v), this.render()) }, v === "tree" ? "tree" : "flat table"),
        ),
      );
      section.append(toggle);
      const page = valuePage(value);
      if (page) section.append(this.pageLine(page));
      if (view === "tree") {
        section.append(valueTree(value.tree), h("details", {}, h("summary", {}, "repr"), h("pre", { class: "repr", tabindex: 0 }, value.repr)));
        this.root.append(section);
        continue;
      }
      const firstByPath = new Map((first?.tree ?? []).map((l) => [l.path, l]));
      const indexOf = new Map(value.tree.map((l, k) => [l, (value.first_leaf ?? 0) + k]));
      const values = (leaf: ValueLeaf): HTMLElement | string => {
        const index = indexOf.get(leaf) ?? 0;
        const text = preview(leaf, index, page);
        const ask = this.askFrom;
        if (leaf.data || !ask || page?.dataFrom === null || page?.dataFrom === undefined || index < page.dataFrom) return text;
        return h("button", { type: "button", class: "linklike", "data-testid": "value-leaf-from", onclick: () => ask(index) }, text);
      };
      const row = (leaf: ValueLeaf): HTMLElement => {
        const s = leaf.summary;
        const bad = (s?.nan_count ?? 0) > 0 || (s?.inf_count ?? 0) > 0;
        const diff = compare && i > 0 ? maxAbsDiff(firstByPath.get(leaf.path), leaf) : null;
        return h(
          "tr",
          { class: bad ? "bad" : "" },
          h("td", { class: "mono" }, leaf.path || "(root)"),
          h("td", { class: "mono" }, fmtAval(leaf.dtype, leaf.shape)),
          h("td", { class: "num" }, fmtNum(s?.min)),
          h("td", { class: "num" }, fmtNum(s?.max)),
          h("td", { class: "num" }, fmtNum(s?.mean)),
          h("td", { class: "num" }, `${s?.nan_count ?? 0} / ${s?.inf_count ?? 0}`),
          h("td", { class: "mono small", title: leaf.sha256 ?? "" }, (leaf.sha256 ?? "").slice(0, 12)),
          h("td", { class: "mono small" }, values(leaf), diff ? h("div", { class: "diff-note" }, diff) : null),
        );
      };
      section.append(
        h("div", { class: "scroll-x", tabindex: 0 }, h(
          "table",
          { class: "leaves" },
          h("caption", {}, page?.leaves ?? `${value.tree.length} ${value.tree.length === 1 ? "leaf" : "leaves"}`),
          h(
            "thead",
            {},
            h("tr", {}, ...["path", "aval", "min", "max", "mean", "NaN / inf", "sha256", "values"].map((t) => h("th", { scope: "col" }, t))),
          ),
          paged(h("tbody"), value.tree, row, (button) => h("tr", {}, h("td", { colspan: 8 }, button))),
        )),
        h("details", { open: true }, h("summary", {}, "repr"), h("pre", { class: "repr", tabindex: 0 }, value.repr)),
      );
      this.root.append(section);
    }
  }
}
