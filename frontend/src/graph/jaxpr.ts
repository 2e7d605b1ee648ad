// Reads the text of a jaxpr (as `jax.make_jaxpr(...)` prints it, and as the jaxpr
// pane shows it) into a graph: one node per equation, edges from the equation (or
// input) that binds a variable to each equation that reads it, and a group for each
// equation whose parameters hold jaxprs (jit, cond's branches, scan, while's body
// and cond, custom_jvp/vjp rules). Shared jaxprs (`let _name = { lambda ... } in`)
// are drawn where they are used. Parsing is lenient: what it cannot read ends the
// equation list of that jaxpr, never the page.
import { lineIndex, type Graph, type GraphEdge, type GraphNode } from "./model";

interface Eqn {
  outs: { name: string; type: string }[];
  prim: string;
  params: string;
  /** nested jaxprs by parameter name (`branches[0]` for the items of a list) */
  nested: { param: string; jaxpr: Jaxpr }[];
  args: string[];
  offset: number;
}

interface Jaxpr {
  consts: { name: string; type: string }[];
  invars: { name: string; type: string }[];
  eqns: Eqn[];
  outs: string[];
  offset: number;
}

const BINDER = /([A-Za-z_]\w*):(\S*?\])(\{[^}\s]*\})?(?=[\s.;]|$)/y;
const EQN_START = /(?:[A-Za-z_]\w*:\S+\s+)+=\s/y;
const ARG = /[^\s[\]{}()]+(?:\[[^\]\s]*\])?/y;
const PRIM = /[A-Za-z_][\w\-]*/y;

class Reader {
  i = 0;
  shared = new Map<string, Jaxpr>();
  constructor(readonly text: string) {}

  private ws(): void {
    while (this.i < this.text.length && /\s/.test(this.text[this.i]!)) this.i++;
  }

  private at(word: string): boolean {
    this.ws();
    return this.text.startsWith(word, this.i);
  }

  private expect(word: string): void {
    if (!this.at(word)) throw new Error(`expected ${word} at ${this.i}`);
    this.i += word.length;
  }

  private sticky(re: RegExp): RegExpExecArray | null {
    this.ws();
    re.lastIndex = this.i;
    const m = re.exec(this.text);
    if (m) this.i = re.lastIndex;
    return m;
  }

  /** The whole text: shared jaxprs first (`let name = {...} in`), then the jaxpr. */
  top(): Jaxpr {
    while (this.at("let ")) {
      this.i += 4;
      const name = this.sticky(/[A-Za-z_]\w*/y)?.[0];
      this.expect("=");
      const jaxpr = this.jaxpr();
      this.expect("in");
      if (name) this.shared.set(name, jaxpr);
    }
    return this.jaxpr();
  }

  private binders(): { name: string; type: string }[] {
    const out: { name: string; type: string }[] = [];
    for (let m = this.sticky(BINDER); m; m = this.sticky(BINDER)) out.push({ name: m[1]!, type: m[2]! });
    return out;
  }

  jaxpr(): Jaxpr {
    this.ws();
    const offset = this.i;
    this.expect("{");
    this.expect("lambda");
    const consts = this.binders();
    this.expect(";");
    const invars = this.binders();
    this.expect(".");
    this.expect("let");
    const eqns: Eqn[] = [];
    for (;;) {
      this.ws();
      EQN_START.lastIndex = this.i;
      if (!EQN_START.test(this.text)) break;
      eqns.push(this.eqn());
    }
    this.expect("in");
    const outsFrom = this.i;
    this.closing("}");
    const outs = this.text
      .slice(outsFrom, this.i - 1)
      .split(/[\s,()]+/)
      .filter((t) => /^[A-Za-z_]\w*$/.test(t));
    return { consts, invars, eqns, outs, offset };
  }

  /** Moves past the bracket that closes the one already open, nesting respected. */
  private closing(close: string): void {
    const open = { "}": "{", "]": "[", ")": "(" }[close]!;
    let depth = 1;
    while (this.i < this.text.length) {
      const c = this.text[this.i++]!;
      if (c === open) depth++;
      else if (c === close && --depth === 0) return;
    }
    throw new Error(`unclosed ${open}`);
  }

  private eqn(): Eqn {
    this.ws();
    const offset = this.i;
    const outs = this.binders();
    this.expect("=");
    const prim = this.sticky(PRIM)?.[0] ?? "?";
    const nested: { param: string; jaxpr: Jaxpr }[] = [];
    let params = "";
    if (this.text[this.i] === "[") {
      const from = ++this.i;
      this.params(nested);
      params = this.text.slice(from, this.i - 1);
    }
    const args: string[] = [];
    for (;;) {
      this.ws();
      if (/^in[\s(]/.test(this.text.slice(this.i, this.i + 3)) && this.endsEquations()) break;
      EQN_START.lastIndex = this.i;
      if (EQN_START.test(this.text)) break;
      const m = this.sticky(ARG);
      if (!m) break;
      args.push(m[0]);
    }
    return { outs, prim, params, nested, args, offset };
  }

  /** At an `in`: whether it ends the equation list (`in (outs) }`: JAX prints the
   * outputs as a tuple), or is a variable named `in` (issue 32's 100-layer MLP has
   * `ip:f32[32,64] = add in io`). */
  private endsEquations(): boolean {
    let j = this.i + 2;
    while (j < this.text.length && /\s/.test(this.text[j]!)) j++;
    return this.text[j] === "(";
  }

  /** Inside `[...]`: finds the jaxprs among the parameters; stops past the `]`. */
  private params(nested: { param: string; jaxpr: Jaxpr }[]): void {
    let key = "";
    let depth = 0; // brackets opened inside the parameter list
    let items = 0; // jaxprs seen in the current parameter (cond's branches)
    while (this.i < this.text.length) {
      const c = this.text[this.i]!;
      if (depth === 0) {
        const kv = /([A-Za-z_]\w*)=/y;
        kv.lastIndex = this.i;
        if (kv.test(this.text) && /[\s[]/.test(this.text[this.i - 1] ?? " ")) {
          key = this.text.slice(this.i, kv.lastIndex - 1);
          items = 0;
          this.i = kv.lastIndex;
          const ref = /([A-Za-z_]\w*)(?=[\s\]])/y;
          ref.lastIndex = this.i;
          const r = ref.exec(this.text);
          if (r && key !== "name" && this.shared.has(r[1]!)) nested.push({ param: key, jaxpr: this.shared.get(r[1]!)! });
          continue;
        }
      }
      if (c === "{" && /^\{\s*lambda\b/.test(this.text.slice(this.i, this.i + 12))) {
        const jaxpr = this.jaxpr();
        nested.push({ param: depth > 0 ? `${key}[${items}]` : key, jaxpr });
        items++;
        continue;
      }
      this.i++;
      if (c === "[" || c === "(" || c === "{") depth++;
      else if (c === "]" || c === ")" || c === "}") {
        if (depth === 0) return; // the `]` that ends the parameters
        depth--;
      }
    }
  }
}

export function parseJaxpr(text: string): Graph {
  const reader = new Reader(text);
  const jaxpr = reader.top();
  const line = lineIndex(text);
  return build(jaxpr, "", line);
}

/** Parameters worth a line in a node's detail: short ones, jaxprs left out. */
function shortParams(params: string): string {
  const flat = params.replace(/\s+/g, " ").trim();
  return flat.length <= 40 && !flat.includes("lambda") ? flat : "";
}

function build(jaxpr: Jaxpr, prefix: string, line: (offset: number) => number): Graph {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const producer = new Map<string, string>();
  const start = line(jaxpr.offset);
  for (const [k, v] of [...jaxpr.consts, ...jaxpr.invars].entries()) {
    const id = `${prefix}in${k}`;
    nodes.push({ id, kind: "input", label: v.name, detail: v.type, op: null, outLine: start });
    producer.set(v.name, id);
  }
  for (const [k, eqn] of jaxpr.eqns.entries()) {
    const id = `${prefix}e${k}`;
    const types = eqn.outs.map((o) => o.type).join(" ");
    const node: GraphNode = { id, kind: "op", label: eqn.prim, detail: [shortParams(eqn.params), types].filter(Boolean).join(" → "), op: eqn.prim, outLine: line(eqn.offset) };
    if (eqn.nested.length > 0) {
      node.kind = "group";
      const name = /(?:^|\s)name=(\S+)/.exec(eqn.params)?.[1];
      node.detail = [name, types].filter(Boolean).join(" → ");
      if (eqn.nested.length === 1) {
        const inner = build(eqn.nested[0]!.jaxpr, `${id}.`, line);
        node.children = inner.nodes;
        node.edges = inner.edges;
      } else {
        node.children = eqn.nested.map((n, j) => {
          const inner = build(n.jaxpr, `${id}.${j}.`, line);
          return { id: `${id}.${j}`, kind: "group", label: n.param, detail: "", op: null, outLine: line(n.jaxpr.offset), children: inner.nodes, edges: inner.edges };
        });
        node.edges = [];
      }
    }
    nodes.push(node);
    for (const arg of new Set(eqn.args)) {
      const from = producer.get(arg);
      if (from) edges.push({ from, to: id });
    }
    for (const o of eqn.outs) if (o.name !== "_") producer.set(o.name, id);
  }
  const outId = `${prefix}out`;
  nodes.push({ id: outId, kind: "output", label: "out", detail: jaxpr.outs.join(", "), op: null, outLine: null });
  for (const o of new Set(jaxpr.outs)) {
    const from = producer.get(o);
    if (from) edges.push({ from, to: outId });
  }
  return { nodes, edges };
}
