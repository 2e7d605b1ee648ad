// Reads optimised HLO text (`HloModule ...`, computations of `%name = type opcode(operands),
// attributes` lines) into a graph of the ENTRY computation: one node per instruction,
// edges from operands, and a group for each instruction that runs other computations
// as part of the data flow — a fusion (`calls=`), a call (`to_apply=`), a while
// (`condition=`, `body=`), a conditional (`branch_computations=`). A reduce's or sort's
// `to_apply` is a scalar combiner, not data flow, and stays out.
import type { Graph, GraphEdge, GraphNode } from "./model";

interface Instr {
  name: string;
  type: string;
  opcode: string;
  operands: string[];
  attrs: string;
  line: number;
  root: boolean;
}

interface Computation {
  name: string;
  line: number;
  instrs: Instr[];
}

const HEADER = /^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$/;
const INSTR = /^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*/;

/** Splits `text` at commas that are not inside brackets. */
function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if ("([{".includes(c)) depth++;
    else if (")]}".includes(c)) depth--;
    else if (c === "," && depth === 0) {
      parts.push(text.slice(from, i));
      from = i + 1;
    }
  }
  parts.push(text.slice(from));
  return parts.map((p) => p.trim()).filter(Boolean);
}

/** The index just past the bracket that closes the one at `open`. */
function closeOf(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if ("([{".includes(c)) depth++;
    else if (")]}".includes(c) && --depth === 0) return i + 1;
  }
  return text.length;
}

function parseInstr(lineText: string, line: number): Instr | null {
  const head = INSTR.exec(lineText);
  if (!head) return null;
  let rest = lineText.slice(head[0].length);
  let type: string;
  if (rest.startsWith("(")) {
    const end = closeOf(rest, 0);
    type = rest.slice(0, end);
    rest = rest.slice(end).trimStart();
  } else {
    const sp = rest.indexOf(" ");
    if (sp < 0) return null;
    type = rest.slice(0, sp);
    rest = rest.slice(sp + 1).trimStart();
  }
  const op = /^([a-z][\w\-]*)\(/.exec(rest);
  if (!op) return null;
  const open = op[1]!.length;
  const close = closeOf(rest, open);
  const operands = splitTop(rest.slice(open + 1, close - 1)).map((o) => o.split(/\s+/).pop()!.replace(/^%/, ""));
  const attrs = rest.slice(close).replace(/^,\s*/, "");
  return { name: head[2]!, type: type.replace(/\{[\d,]*\}/g, ""), opcode: op[1]!, operands, attrs, line, root: !!head[1] };
}

function parseModule(text: string): { entry: Computation | null; byName: Map<string, Computation> } {
  const lines = text.split("\n");
  const byName = new Map<string, Computation>();
  let entry: Computation | null = null;
  let current: Computation | null = null;
  for (const [k, lineText] of lines.entries()) {
    if (current) {
      if (/^\s*}\s*$/.test(lineText)) {
        current = null;
        continue;
      }
      const instr = parseInstr(lineText, k + 1);
      if (instr) current.instrs.push(instr);
      continue;
    }
    const h = HEADER.exec(lineText);
    if (h) {
      current = { name: h[2]!, line: k + 1, instrs: [] };
      byName.set(current.name, current);
      if (h[1]) entry = current;
    }
  }
  return { entry, byName };
}

/** The computations an instruction runs as part of its data flow, with a label each. */
function calledComputations(instr: Instr): { label: string; name: string }[] {
  const one = (key: string) => new RegExp(`(?:^|,\\s*)${key}=%?([\\w.\\-]+)`).exec(instr.attrs)?.[1];
  const out: { label: string; name: string }[] = [];
  if (instr.opcode === "fusion" || instr.opcode === "async-start") {
    const c = one("calls");
    if (c) out.push({ label: "calls", name: c });
  } else if (instr.opcode === "call") {
    const c = one("to_apply");
    if (c) out.push({ label: "to_apply", name: c });
  } else if (instr.opcode === "while") {
    const c = one("condition");
    const b = one("body");
    if (c) out.push({ label: "condition", name: c });
    if (b) out.push({ label: "body", name: b });
  } else if (instr.opcode === "conditional") {
    const list = /branch_computations=\{([^}]*)\}/.exec(instr.attrs)?.[1] ?? "";
    for (const [j, n] of list.split(",").map((s) => s.trim().replace(/^%/, "")).filter(Boolean).entries()) {
      out.push({ label: `branch ${j}`, name: n });
    }
  }
  return out;
}

export function parseHlo(text: string): Graph {
  const { entry, byName } = parseModule(text);
  if (!entry) return { nodes: [], edges: [] };
  return build(entry, "", byName, new Set());
}

function build(comp: Computation, prefix: string, byName: Map<string, Computation>, open: Set<string>): Graph {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const ids = new Map<string, string>();
  open.add(comp.name);
  for (const [k, instr] of comp.instrs.entries()) {
    const id = `${prefix}i${k}`;
    ids.set(instr.name, id);
    const isParam = instr.opcode === "parameter";
    const node: GraphNode = {
      id,
      kind: isParam ? "input" : "op",
      label: isParam ? instr.name : instr.opcode,
      detail: isParam ? instr.type : `${instr.name}: ${instr.type}`,
      op: instr.opcode,
      outLine: instr.line,
    };
    const called = calledComputations(instr).filter((c) => byName.has(c.name) && !open.has(c.name));
    if (called.length > 0) {
      node.kind = "group";
      node.label = instr.opcode === "fusion" ? `fusion ${/kind=(\w+)/.exec(instr.attrs)?.[1] ?? ""}`.trim() : instr.opcode;
      if (called.length === 1) {
        const inner = build(byName.get(called[0]!.name)!, `${id}.`, byName, open);
        node.children = inner.nodes;
        node.edges = inner.edges;
      } else {
        node.children = called.map((c, j) => {
          const sub = byName.get(c.name)!;
          const inner = build(sub, `${id}.${j}.`, byName, open);
          return { id: `${id}.${j}`, kind: "group", label: c.label, detail: sub.name, op: null, outLine: sub.line, children: inner.nodes, edges: inner.edges };
        });
        node.edges = [];
      }
    }
    nodes.push(node);
    for (const operand of new Set(instr.operands)) {
      const from = ids.get(operand);
      if (from) edges.push({ from, to: id });
    }
  }
  open.delete(comp.name);
  return { nodes, edges };
}
