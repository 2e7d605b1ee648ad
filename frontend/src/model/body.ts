// What a function's docstring and body say of its parameters' values, where they say
// it for certain (model/signature.ts turns it into example arguments):
//   the docstring    "x: (4, 3)", "w -- array of shape (3, 2)", "x (4, 3)": a line
//                    that starts with the name and holds a shape tuple
//   an assert        `assert x.shape == (4, 3)`
//   an unpacking     `n, d = x.shape`: two dimensions
//   indexing         `x[i, j]`, `x[:, 0]`: at least that many dimensions
//   a dict           `p["w"]`, `p['b']` only: a dict of those keys
//   a tuple          `w, b = p`: a tuple of that many
//   a condition      `if x > 0:`, `while x`: a scalar, `jnp.array(1.0)` (the sharp
//                    bit then shows as JAX's TracerBoolConversionError, where a vector
//                    would fail with "truth value of an array … is ambiguous")
// Dimensions not given are 3, so what the body combines broadcasts and multiplies.
// Regular expressions over the text, on purpose: the parser's tree is the signature's;
// these read only shapes written out, and say nothing when in doubt.

export interface BodyHint {
  /** the example value, as Python text */
  value: string;
  /** where it came from, for the args note */
  why: string;
}

const SIZE = 3;
const ones = (dims: number[]): string => `jnp.ones(${dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(", ")})`})`;
const esc = (name: string): string => name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** "4, 3" -> [4, 3]; null unless every entry is a whole number. */
function sizes(tuple: string): number[] | null {
  const parts = tuple.split(",").map((x) => x.trim()).filter(Boolean);
  if (parts.length === 0 || !parts.every((x) => /^\d+$/.test(x))) return null;
  return parts.map(Number);
}

/** The docstring of a body (its first statement, a string), or "". */
function docstring(body: string): string {
  const m = /^[:\s]*(?:[rRuU])?("""|''')([\s\S]*?)\1/.exec(body) ?? /^[:\s]*(?:[rRuU])?(["'])(.*?)\1/.exec(body);
  return m?.[2] ?? "";
}

function fromDocstring(doc: string, name: string): BodyHint | null {
  const line = new RegExp(`^\\s*${esc(name)}\\b(?![\\w.\\[(])[^\\n]*?\\(\\s*(\\d+(?:\\s*,\\s*\\d+)*)\\s*,?\\s*\\)`, "m").exec(doc);
  const dims = line ? sizes(line[1]!) : null;
  return dims ? { value: ones(dims), why: "the docstring" } : null;
}

function fromBody(body: string, name: string): BodyHint | null {
  const n = esc(name);
  const asserted = new RegExp(`(?<![\\w.])${n}\\.shape\\s*==\\s*\\(([^)]*)\\)`).exec(body);
  const dims = asserted ? sizes(asserted[1]!) : null;
  if (dims) return { value: ones(dims), why: `\`${name}.shape == (${dims.join(", ")})\`` };
  const unpacked = new RegExp(`(?:^|\\n)\\s*\\(?\\s*([A-Za-z_]\\w*(?:\\s*,\\s*[A-Za-z_]\\w*)+)\\s*,?\\s*\\)?\\s*=\\s*${n}\\.shape\\b`).exec(body);
  if (unpacked) {
    const rank = unpacked[1]!.split(",").length;
    return { value: ones(Array(rank).fill(SIZE)), why: `\`… = ${name}.shape\` (${rank} dimensions)` };
  }
  // Python control flow on it: a scalar (not `if x.shape[0] > 2`, `if len(x)`)
  const cond = new RegExp(`(?:^|\\n)\\s*(?:if|elif|while)\\b([^\\n]*)`, "g");
  for (const m of body.matchAll(cond)) {
    const test = m[1]!;
    if (new RegExp(`(?<![\\w.])${n}(?![\\w.\\[])`).test(test) && !new RegExp(`len\\(\\s*${n}\\b`).test(test)) {
      return { value: "jnp.array(1.0)", why: `\`${test.trim().replace(/:$/, "")}\` (a scalar)` };
    }
  }
  // subscripts: string keys make a dict; otherwise the most entries index a rank
  const keys: string[] = [];
  let rank = 0;
  let other = false;
  for (const m of body.matchAll(new RegExp(`(?<![\\w.])${n}\\[([^\\[\\]()]*)\\]`, "g"))) {
    const inside = m[1]!.trim();
    const key = /^(["'])(\w+)\1$/.exec(inside);
    if (key) {
      if (!keys.includes(key[2]!)) keys.push(key[2]!);
      continue;
    }
    const entries = inside.split(",").map((x) => x.trim()).filter(Boolean);
    if (entries.some((e) => e === "..." || e === "None")) {
      other = true; // an ellipsis or a new axis: the rank is not what is written
      continue;
    }
    rank = Math.max(rank, entries.length);
  }
  if (keys.length > 0 && rank === 0 && !other) {
    return { value: `{${keys.map((k) => `"${k}": ${ones([SIZE])}`).join(", ")}}`, why: `\`${name}["${keys[0]}"]\`` };
  }
  if (rank >= 2 && !other && keys.length === 0) return { value: ones(Array(rank).fill(SIZE)), why: `indexed with ${rank} indices` };
  // `w, b = params`: a tuple of that many
  const split = new RegExp(`(?:^|\\n)\\s*\\(?\\s*([A-Za-z_]\\w*(?:\\s*,\\s*[A-Za-z_]\\w*)+)\\s*,?\\s*\\)?\\s*=\\s*${n}\\s*(?:#.*)?(?:\\n|$)`).exec(body);
  if (split) {
    const count = split[1]!.split(",").length;
    return { value: `(${Array(count).fill(ones([SIZE])).join(", ")})`, why: `\`… = ${name}\` (a tuple of ${count})` };
  }
  return null;
}

/** What the docstring or the body (its text, from the colon) says of each of `names`. */
export function bodyHints(body: string, names: readonly string[]): Map<string, BodyHint> {
  const doc = docstring(body);
  const hints = new Map<string, BodyHint>();
  for (const name of names) {
    const hint = fromDocstring(doc, name) ?? fromBody(body, name);
    if (hint) hints.set(name, hint);
  }
  return hints;
}
