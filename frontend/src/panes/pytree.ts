// A value's leaves as a tree: the paths JAX's `jax.tree_util.keystr` writes (the
// value event's `leaf.path`) parsed into their keys, and the leaves grouped by path
// prefix, each node with its parameters (elements) and bytes summed over its leaves.
//
// keystr's spellings (measured with JAX 0.10 on a dict, a list, a namedtuple, a Flax
// NNX state, a Linen variables dict and an Equinox MLP):
//   dict key        ['a']  ["we'ird"]  [5]  [None]  [(1, 2)]   (the key's repr)
//   sequence index  [0]
//   attribute       .w  .layers  .value   (namedtuples, dataclasses, Equinox modules)
//   flattened index [<flat index 3>]
//   the root        ""   (the value is one leaf)
// A path the engine cut at its length bound (MAX_LABEL_CHARS) may end mid-key: the
// rest is kept as one "raw" segment, never dropped.

/** One step of a leaf's path. */
export interface PathSegment {
  kind: "key" | "index" | "attr" | "flat" | "raw";
  /** as keystr wrote it: `['a']`, `[0]`, `.w`, `[<flat index 3>]` */
  text: string;
  /** for people: the key's string, the index, the attribute's name */
  name: string;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*/;
const ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0" };

/** A Python string literal at `s[i]` (a quote): its value and the index after it,
 * or null when it does not end. */
function pyString(s: string, i: number): { value: string; end: number } | null {
  const quote = s[i];
  let value = "";
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j]!;
    if (c === "\\") {
      const next = s[j + 1];
      if (next === undefined) return null;
      if (next === "x" || next === "u" || next === "U") {
        const len = next === "x" ? 2 : next === "u" ? 4 : 8;
        const hex = s.slice(j + 2, j + 2 + len);
        if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) return null;
        value += String.fromCodePoint(parseInt(hex, 16));
        j += 1 + len;
      } else {
        value += ESCAPES[next] ?? `\\${next}`;
        j += 1;
      }
    } else if (c === quote) {
      return { value, end: j + 1 };
    } else value += c;
  }
  return null;
}

/** The index after the `]` that closes the bracket at `s[i]`, minding nested brackets
 * and quoted strings (a tuple key `[(1, 'a]')]`); -1 when it does not close. */
function closing(s: string, i: number): number {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j]!;
    if (c === "'" || c === '"') {
      const str = pyString(s, j);
      if (!str) return -1;
      j = str.end - 1;
    } else if (c === "[" || c === "(" || c === "{") depth++;
    else if (c === "]" || c === ")" || c === "}") {
      depth--;
      if (depth === 0) return c === "]" ? j + 1 : -1;
    }
  }
  return -1;
}

/** keystr's path as its segments (see the spellings above). */
export function parsePath(path: string): PathSegment[] {
  const out: PathSegment[] = [];
  let i = 0;
  while (i < path.length) {
    const rest = path.slice(i);
    if (rest[0] === ".") {
      const m = IDENT.exec(rest.slice(1));
      if (m) {
        out.push({ kind: "attr", text: `.${m[0]}`, name: m[0] });
        i += 1 + m[0].length;
        continue;
      }
    } else if (rest[0] === "[") {
      const flat = /^\[<flat index (\d+)>\]/.exec(rest);
      const index = /^\[(-?\d+)\]/.exec(rest);
      if (flat) {
        out.push({ kind: "flat", text: flat[0], name: `#${flat[1]}` });
        i += flat[0].length;
        continue;
      }
      if (index) {
        out.push({ kind: "index", text: index[0], name: index[1]! });
        i += index[0].length;
        continue;
      }
      if (rest[1] === "'" || rest[1] === '"') {
        const str = pyString(rest, 1);
        if (str && rest[str.end] === "]") {
          out.push({ kind: "key", text: rest.slice(0, str.end + 1), name: str.value });
          i += str.end + 1;
          continue;
        }
      }
      const end = closing(rest, 0);
      if (end > 0) {
        const text = rest.slice(0, end);
        out.push({ kind: "key", text, name: text.slice(1, -1) });
        i += end;
        continue;
      }
    }
    out.push({ kind: "raw", text: rest, name: rest });
    break;
  }
  return out;
}

/** Bytes per element of a dtype as JAX prints it; null where it is not fixed (an
 * object, a PRNG key's impl-dependent data, an unknown name). int4 and float4 pack
 * two to a byte in XLA but take one in NumPy: 0.5 is counted (what the weights need). */
export function dtypeBytes(dtype: string): number | null {
  if (dtype === "bool") return 1;
  if (dtype === "float0") return 0;
  const m = /^(?:u?int|float|bfloat|complex)(\d+)/.exec(dtype);
  if (!m) return null;
  return Number(m[1]) / 8;
}

/** The leaf fields the tree reads (the value event's Leaf). */
export interface TreeLeaf {
  path: string;
  shape: number[];
  dtype: string;
}

export interface TreeNode<L extends TreeLeaf = TreeLeaf> {
  /** the node's label: its segments' text, `['layers']`, `[0]`, `.weight` (several
   * when a chain of single children is shown as one node: `['kernel'].value`) */
  label: string;
  /** the path up to and with this node, as keystr would write it */
  path: string;
  children: TreeNode<L>[];
  /** the leaf this node is (a leaf has no children) */
  leaf: L | null;
  /** leaves under it (itself for a leaf) */
  leaves: number;
  /** elements summed over its leaves */
  params: number;
  /** bytes summed over its leaves; `bytesKnown` false when a leaf's dtype has no fixed size */
  bytes: number;
  bytesKnown: boolean;
}

export function elements(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The leaves grouped by path prefix, in the order they came (the pytree's order).
 * A node with one child that is a leaf becomes that leaf labelled with both
 * (`['kernel']` + `.value` -> `['kernel'].value`, Flax NNX's Variable). The root's
 * label is "" and its path "". */
export function buildTree<L extends TreeLeaf>(leaves: readonly L[]): TreeNode<L> {
  const root: TreeNode<L> = { label: "", path: "", children: [], leaf: null, leaves: 0, params: 0, bytes: 0, bytesKnown: true };
  const index = new Map<TreeNode<L>, Map<string, TreeNode<L>>>();
  for (const leaf of leaves) {
    const segments = parsePath(leaf.path);
    const n = elements(leaf.shape);
    const per = dtypeBytes(leaf.dtype);
    const add = (node: TreeNode<L>): void => {
      node.leaves += 1;
      node.params += n;
      if (per === null) node.bytesKnown = false;
      else node.bytes += n * per;
    };
    add(root);
    if (segments.length === 0) {
      // the value is one leaf (or a path seen twice): a leaf under the root
      root.children.push({ label: "", path: "", children: [], leaf, leaves: 1, params: n, bytes: per === null ? 0 : n * per, bytesKnown: per !== null });
      continue;
    }
    let node = root;
    let path = "";
    for (const [k, seg] of segments.entries()) {
      path += seg.text;
      const last = k === segments.length - 1;
      let kids = index.get(node);
      if (!kids) index.set(node, (kids = new Map()));
      let child = last ? undefined : kids.get(seg.text);
      if (!child || child.leaf) {
        child = { label: seg.text, path, children: [], leaf: last ? leaf : null, leaves: 0, params: 0, bytes: 0, bytesKnown: true };
        node.children.push(child);
        if (!last) kids.set(seg.text, child);
      }
      add(child);
      node = child;
    }
  }
  fold(root);
  return root;
}

/** A group whose only child is a leaf becomes that leaf, labelled with both. */
function fold<L extends TreeLeaf>(node: TreeNode<L>): void {
  for (const [i, child] of node.children.entries()) {
    fold(child);
    const only = child.children.length === 1 ? child.children[0]! : null;
    if (only && only.leaf) node.children[i] = { ...only, label: child.label + only.label };
  }
}

/** "1.2 K" style count of parameters. */
export function fmtCount(n: number): string {
  if (n < 1000) return String(n);
  const units = ["K", "M", "B", "T"];
  let v = n;
  let u = -1;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ${units[u]}`;
}

/** Bytes in B, KiB, MiB, GiB. */
export function fmtBytes(n: number, known = true): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const text = u === 0 ? `${v} B` : `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ${units[u]}`;
  return known ? text : `≥ ${text}`;
}
