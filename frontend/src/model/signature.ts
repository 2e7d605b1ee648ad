// Args that follow the function: the entry's signature, read from the code with the
// same Python parser the editor uses, and example arguments built from what the code
// says of each parameter (model/body.ts reads the body): a number default as it is; a
// jaxtyping annotation's shape and dtype; a shape in the docstring; a shape the body
// asserts or unpacks, or the rank its indexing needs; a dict for `p["w"]`, a tuple for
// `a, b = p`; else `jnp.ones((3,))` (a vector: `x @ w` of two parameters works, as it
// would not on 0-d arrays). Every dimension not given is 3, so what the body combines
// broadcasts and multiplies. Also recognises the TypeError a count mismatch gives, so
// the page can say it in words and offer the fix.
import { parser } from "@lezer/python";
import type { SyntaxNode } from "@lezer/common";
import { bodyHints, type BodyHint } from "./body";

export interface Param {
  name: string;
  /** the default's source text, when there is one */
  default: string | null;
  /** true when the default is a number literal (possibly negative) */
  numericDefault: boolean;
  /** the annotation's source text, when there is one */
  annotation: string | null;
  /** what the docstring or the body says of its value (model/body.ts), when they say something */
  hint: BodyHint | null;
}

export interface Signature {
  name: string;
  /** the positional parameters, in order (keyword-only and * / ** ones left out) */
  params: Param[];
}

/** The signature of the top-level `def entry(...)` (or `entry = lambda ...`) in `code`;
 * null when the code defines none (a dotted entry, a name bound another way). */
export function entrySignature(code: string, entry: string): Signature | null {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(entry)) return null;
  const top = parser.parse(code).topNode;
  let found: SyntaxNode | null = null;
  let body = "";
  // The last definition wins, as it does when Python runs the module.
  for (let node = top.firstChild; node; node = node.nextSibling) {
    const def = node.name === "DecoratedStatement" ? node.getChild("FunctionDefinition") : node;
    if (def?.name === "FunctionDefinition" && text(code, def.getChild("VariableName")) === entry) {
      found = def.getChild("ParamList");
      body = text(code, def.getChild("Body"));
    } else if (node.name === "AssignStatement") {
      const target = node.firstChild;
      const lambda = node.getChild("LambdaExpression");
      if (target?.name === "VariableName" && text(code, target) === entry && lambda && node.getChildren("AssignOp").length === 1) {
        found = lambda.getChild("ParamList") ?? lambda; // `lambda: 1` has no ParamList
        body = text(code, lambda);
      }
    }
  }
  if (!found) return null;
  const params = found.name === "ParamList" ? positionalParams(code, found) : [];
  const hints = bodyHints(body, params.map((p) => p.name));
  for (const p of params) p.hint = hints.get(p.name) ?? null;
  return { name: entry, params };
}

/** The top-level functions of `code` (`def`s and `name = lambda`), with where each is. */
export function topLevelFunctions(code: string): { name: string; from: number; to: number }[] {
  const out: { name: string; from: number; to: number }[] = [];
  for (let node = parser.parse(code).topNode.firstChild; node; node = node.nextSibling) {
    const def = node.name === "DecoratedStatement" ? node.getChild("FunctionDefinition") : node;
    const name = def?.name === "FunctionDefinition" ? text(code, def.getChild("VariableName")) : "";
    if (name) out.push({ name, from: node.from, to: node.to });
    else if (node.name === "AssignStatement" && node.firstChild?.name === "VariableName" && node.getChild("LambdaExpression")) {
      out.push({ name: text(code, node.firstChild), from: node.from, to: node.to });
    }
  }
  return out;
}

/** The entry to follow when `entry` names no function of `code`: the top-level function
 * under the cursor, else the last one (the one the user just wrote); null to keep
 * `entry` (it names one, or is dotted, or the code defines none). */
export function followedEntry(code: string, entry: string, cursor: number | null): string | null {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(entry)) return null; // jax.nn.gelu: not the code's
  const fns = topLevelFunctions(code);
  if (fns.length === 0 || fns.some((f) => f.name === entry)) return null;
  // bound another way at the top level (`f = jax.jit(g)`, a class, an import): kept
  const n = entry; // an identifier (checked above): nothing to escape
  if (new RegExp(`^(?:${n}\\s*(?::[^=\\n]*)?=[^=]|class\\s+${n}\\b|(?:from\\s+\\S+\\s+)?import\\s+[^\\n]*\\b${n}\\b)`, "m").test(code)) return null;
  const under = cursor === null ? undefined : fns.find((f) => f.from <= cursor && cursor <= f.to);
  return (under ?? fns[fns.length - 1]!).name;
}

function text(code: string, node: SyntaxNode | null): string {
  return node ? code.slice(node.from, node.to) : "";
}

function positionalParams(code: string, list: SyntaxNode): Param[] {
  const params: Param[] = [];
  let current: Param | null = null;
  let afterAssign = false;
  let starred = false; // after `*`, `*args` or `**kw`: no more positional parameters
  for (let child = list.firstChild; child; child = child.nextSibling) {
    const t = text(code, child);
    if (child.name === "(" || child.name === ")") continue;
    if (child.name === ",") {
      current = null;
      afterAssign = false;
      continue;
    }
    if (t === "*" || t === "**") {
      starred = true;
      continue;
    }
    if (t === "/") continue;
    if (child.name === "AssignOp") {
      afterAssign = true;
      continue;
    }
    if (child.name === "TypeDef" && current) {
      current.annotation = text(code, child).replace(/^:\s*/, "");
      continue;
    }
    if (afterAssign && current) {
      current.default = t;
      current.numericDefault = /^[-+]?\s*(\d[\d_]*\.?[\d_]*([eE][-+]?\d+)?|\.\d[\d_]*([eE][-+]?\d+)?)$/.test(t.trim());
      continue;
    }
    if (child.name === "VariableName" && !starred) {
      current = { name: t, default: null, numericDefault: false, annotation: null, hint: null };
      params.push(current);
    }
  }
  return params;
}

const DTYPES: Record<string, string | null> = {
  Float: null, Float16: "jnp.float16", BFloat16: "jnp.bfloat16", Float32: "jnp.float32", Float64: "jnp.float64",
  Int: "jnp.int32", Int8: "jnp.int8", Int16: "jnp.int16", Int32: "jnp.int32", Int64: "jnp.int64",
  UInt: "jnp.uint32", UInt8: "jnp.uint8", UInt32: "jnp.uint32", Bool: "jnp.bool_", Shaped: null, Real: null, Inexact: null,
};

/** An example value for one parameter, as Python text, and where it came from.
 * `dims` keeps named dimensions consistent across parameters (the same name gets the
 * same size). */
function exampleFor(p: Param, dims: Map<string, number>): { value: string; why: string } {
  if (p.numericDefault && p.default !== null) return { value: p.default.trim(), why: "its default" };
  const a = p.annotation?.trim() ?? "";
  if (a === "float") return { value: "1.0", why: "float" };
  if (a === "int") return { value: "3", why: "int" };
  if (a === "bool") return { value: "True", why: "bool" };
  // jaxtyping: Float[Array, "batch 3"], Int32[Array, ""], Float[jax.Array, "n n"]
  const m = /^(?:\w+\.)*(\w+)\[\s*[\w.]+\s*,\s*(["'])(.*)\2\s*\]$/.exec(a);
  if (m && m[1]! in DTYPES) {
    const shape = shapeOf(m[3]!, dims);
    if (shape !== null) {
      const dtype = DTYPES[m[1]!];
      return { value: `jnp.ones(${shape}${dtype ? `, dtype=${dtype}` : ""})`, why: "its annotation" };
    }
  }
  if (p.hint) return { value: p.hint.value, why: p.hint.why };
  return { value: DEFAULT_ARRAY, why: "no shape in the code" };
}

/** An argument the code says nothing about: a vector (two of them multiply with `@`). */
export const DEFAULT_ARRAY = "jnp.ones((3,))";

/** jaxtyping's dimension string as a Python shape tuple; null for variadic ones. */
function shapeOf(spec: string, dims: Map<string, number>): string | null {
  const sizes: number[] = [];
  for (const dim of spec.trim().split(/\s+/).filter(Boolean)) {
    if (/^\d+$/.test(dim)) sizes.push(Number(dim));
    else if (/^[A-Za-z_]\w*$/.test(dim)) {
      if (!dims.has(dim)) dims.set(dim, 2 + dims.size + 1); // 3, 4, 5, … tell them apart
      sizes.push(dims.get(dim)!);
    } else return null; // *batch, ..., #n, expressions: no single shape to pick
  }
  return sizes.length === 1 ? `(${sizes[0]},)` : `(${sizes.join(", ")})`;
}

/** The args text for `sig`: a tuple with one example value per positional parameter,
 * stopping at the first parameter whose default is not a number (it keeps its default). */
export function argsFor(sig: Signature): string {
  return proposeArgs(sig).text;
}

/** The args for `sig` and, per parameter, where its value came from (the args note). */
export function proposeArgs(sig: Signature): { text: string; sources: { name: string; why: string }[] } {
  const dims = new Map<string, number>();
  const values: string[] = [];
  const sources: { name: string; why: string }[] = [];
  for (const p of sig.params) {
    if (p.default !== null && !p.numericDefault) break;
    const e = exampleFor(p, dims);
    values.push(e.value);
    sources.push({ name: p.name, why: e.why });
  }
  const text = values.length === 0 ? "()" : values.length === 1 ? `(${values[0]},)` : `(${values.join(", ")})`;
  return { text, sources };
}

/** How the signature reads, for messages: `f(x, n=3)`. */
export function describeSignature(sig: Signature): string {
  return `${sig.name}(${sig.params.map((p) => (p.default !== null ? `${p.name}=${p.default}` : p.name)).join(", ")})`;
}

/** A stable key of what matters for the args: names, defaults and annotations. */
export function signatureKey(sig: Signature | null): string | null {
  return sig ? JSON.stringify(sig.params) : null;
}

/** Python's words for calling with the wrong number of arguments, as JAX passes them on. */
const COUNT_MISMATCH = [
  /takes (\d+) positional arguments? but (\d+) (?:were|was) given/,
  /missing (\d+) required positional arguments?/,
  /takes from (\d+) to (\d+) positional arguments but (\d+) were given/,
  /takes (?:no|0) arguments? \((\d+) given\)/,
];

export function isArgCountError(kind: string, message: string): boolean {
  return kind === "TypeError" && COUNT_MISMATCH.some((re) => re.test(message));
}
