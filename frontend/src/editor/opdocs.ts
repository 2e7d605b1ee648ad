// Documentation on hover for jaxpr primitives and StableHLO/HLO ops. The tables are
// generated at build time from what is installed (scripts/gen_op_docs.py: JAX's
// docstrings and rule tables; the StableHLO op descriptions jaxlib ships); nothing is
// fetched at run time. Shown in an element with role="tooltip" (editor/opdocs-tooltip.ts,
// which loads this module on the first hover).
import { docLink, h, withCode } from "../util/dom";
import jaxprDocs from "../generated/jaxpr-primitives.json";
import stablehloDocs from "../generated/stablehlo-ops.json";
import hloDocs from "../hlo-ops.json";

export interface OpDoc {
  title: string;
  summary: string;
  /** how it is called (jaxpr: the JAX function; StableHLO: operands and attributes) */
  signature: string;
  /** which transformations have rules for it (jaxpr primitives) */
  transforms: string[];
  url: string;
}

type DocKind = "jaxpr" | "stablehlo" | "hlo";

const PRIMS = jaxprDocs.primitives as Record<string, { summary: string; signature: string; transforms: string[]; url: string }>;
const OPS = stablehloDocs.ops as Record<string, { summary: string; operands: string[]; url: string }>;

const XLA_SEMANTICS = hloDocs.xla_semantics;

/** HLO opcodes whose StableHLO op has another name. */
const HLO_TO_STABLEHLO: Record<string, string> = hloDocs.hlo_to_stablehlo;

/** HLO opcodes with no StableHLO op: what XLA means by them. */
const HLO_ONLY: Record<string, string> = hloDocs.hlo_only;

export function docFor(kind: DocKind, op: string): OpDoc | null {
  if (kind === "jaxpr") {
    const p = PRIMS[op];
    if (!p) return null;
    return { title: op, summary: p.summary, signature: p.signature, transforms: p.transforms, url: p.url };
  }
  if (kind === "stablehlo") {
    const name = op.replace(/^stablehlo\./, "");
    const o = OPS[name];
    return o ? { title: `stablehlo.${name}`, summary: o.summary, signature: o.operands.length ? `operands and attributes: ${o.operands.join(", ")}` : "", transforms: [], url: o.url } : null;
  }
  const only = HLO_ONLY[op];
  if (only) return { title: op, summary: only, signature: "", transforms: [], url: XLA_SEMANTICS };
  const o = OPS[HLO_TO_STABLEHLO[op] ?? op.replace(/-/g, "_")];
  return o ? { title: op, summary: o.summary, signature: o.operands.length ? `operands and attributes: ${o.operands.join(", ")}` : "", transforms: [], url: o.url } : null;
}

export function docElement(doc: OpDoc): HTMLElement {
  return h(
    "div",
    { class: "op-doc-body", "data-op": doc.title },
    h("strong", { class: "op-doc-title" }, doc.title),
    doc.summary ? h("p", { class: "op-doc-summary" }, withCode(doc.summary)) : null,
    doc.signature ? h("code", { class: "op-doc-signature" }, doc.signature) : null,
    doc.transforms.length ? h("p", { class: "op-doc-rules" }, `rules: ${doc.transforms.join(", ")}`) : null,
    doc.url ? h("p", { class: "op-doc-link" }, docLink(doc.url, doc.url.includes("docs.jax.dev") ? "JAX docs" : doc.url.includes("stablehlo") ? "StableHLO spec" : "XLA docs")) : null,
  );
}

/** The op named at `pos` of a line of `kind` text, if any: its word, from and to. */
export function opAt(kind: DocKind, line: string, at: number): { op: string; from: number; to: number } | null {
  const chars = kind === "stablehlo" ? /[\w.]/ : kind === "hlo" ? /[\w-]/ : /\w/;
  let from = at;
  let to = at;
  while (from > 0 && chars.test(line[from - 1]!)) from--;
  while (to < line.length && chars.test(line[to]!)) to++;
  const word = line.slice(from, to);
  if (!word) return null;
  if (kind === "jaxpr") {
    // a primitive is the word right after `=` (variables have names like `ne` or `or`)
    return /=\s*$/.test(line.slice(0, from)) && PRIMS[word] ? { op: word, from, to } : null;
  }
  if (kind === "stablehlo") return word.startsWith("stablehlo.") && docFor("stablehlo", word) ? { op: word, from, to } : null;
  return line[to] === "(" && /=\s*(\([^=]*\)|\S+)\s+$/.test(line.slice(0, from)) && docFor("hlo", word) ? { op: word, from, to } : null;
}
