// Args that follow the function: the entry's signature, read from the code with the
// same Python parser the editor uses, and example arguments built from it (an array
// per parameter, the default for numeric defaults, shapes from jaxtyping-style
// annotations). Without an annotation the array is 0-d, `jnp.array(1.0)`: then Python
// control flow on it fails as JAX's sharp bit says (TracerBoolConversionError), not
// with NumPy's "truth value of an array with more than one element is ambiguous". Also recognises the TypeError a count mismatch gives, so the page can
// say it in words and offer the fix.
import { parser } from "@lezer/python";
import type { SyntaxNode } from "@lezer/common";

export interface Param {
  name: string;
  /** the default's source text, when there is one */
  default: string | null;
  /** true when the default is a number literal (possibly negative) */
  numericDefault: boolean;
  /** the annotation's source text, when there is one */
  annotation: string | null;
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
  // The last definition wins, as it does when Python runs the module.
  for (let node = top.firstChild; node; node = node.nextSibling) {
    const def = node.name === "DecoratedStatement" ? node.getChild("FunctionDefinition") : node;
    if (def?.name === "FunctionDefinition" && text(code, def.getChild("VariableName")) === entry) {
      found = def.getChild("ParamList");
    } else if (node.name === "AssignStatement") {
      const target = node.firstChild;
      const lambda = node.getChild("LambdaExpression");
      if (target?.name === "VariableName" && text(code, target) === entry && lambda && node.getChildren("AssignOp").length === 1) {
        found = lambda.getChild("ParamList") ?? lambda; // `lambda: 1` has no ParamList
      }
    }
  }
  if (!found) return null;
  return { name: entry, params: found.name === "ParamList" ? positionalParams(code, found) : [] };
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
      current = { name: t, default: null, numericDefault: false, annotation: null };
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

/** An example value for one parameter, as Python text. `dims` keeps named dimensions
 * consistent across parameters (the same name gets the same size). */
function exampleFor(p: Param, dims: Map<string, number>): string {
  if (p.numericDefault && p.default !== null) return p.default.trim();
  const a = p.annotation?.trim() ?? "";
  if (a === "float") return "1.0";
  if (a === "int") return "3";
  if (a === "bool") return "True";
  // jaxtyping: Float[Array, "batch 3"], Int32[Array, ""], Float[jax.Array, "n n"]
  const m = /^(?:\w+\.)*(\w+)\[\s*[\w.]+\s*,\s*(["'])(.*)\2\s*\]$/.exec(a);
  if (m && m[1]! in DTYPES) {
    const shape = shapeOf(m[3]!, dims);
    if (shape !== null) {
      const dtype = DTYPES[m[1]!];
      return `jnp.ones(${shape}${dtype ? `, dtype=${dtype}` : ""})`;
    }
  }
  return "jnp.array(1.0)";
}

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
  const dims = new Map<string, number>();
  const values: string[] = [];
  for (const p of sig.params) {
    if (p.default !== null && !p.numericDefault) break;
    values.push(exampleFor(p, dims));
  }
  if (values.length === 0) return "()";
  return values.length === 1 ? `(${values[0]},)` : `(${values.join(", ")})`;
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
