// Completion of JAX's and the libraries' public names (`jnp.su` -> `sum(a, axis=None, …)`
// with the first line of its doc), from a static index per JAX version made at build
// time (scripts/gen_completions.py -> generated/completions/<version>.json). Each index is
// a chunk of its own, loaded the first time the editor asks for a completion: no server
// call per keystroke. A version the page has no index of gets the default version's.
import type { Completion, CompletionContext, CompletionResult, CompletionSource } from "@codemirror/autocomplete";
import { DEFAULT_COMPLETIONS } from "../generated/completions/default";

/** `[kind, signature, first doc line]`; kind: f(unction), c(lass), m(odule), v(alue) */
export type Member = [string, string, string];
export interface CompletionIndex {
  jax: string;
  modules: Record<string, Record<string, Member>>;
}

const LOADERS = import.meta.glob<CompletionIndex>("../generated/completions/*.json", { import: "default" });
const loaded = new Map<string, Promise<CompletionIndex | null>>();

/** The versions the page has an index of. */
export function indexedVersions(): string[] {
  return Object.keys(LOADERS).map((path) => path.slice(path.lastIndexOf("/") + 1, -".json".length));
}

/** The index of `version` (empty: the default's), or the default's where there is none. */
export function loadIndex(version: string | undefined): Promise<CompletionIndex | null> {
  const wanted = version && indexedVersions().includes(version) ? version : DEFAULT_COMPLETIONS;
  let promise = loaded.get(wanted);
  if (!promise) {
    const loader = LOADERS[`../generated/completions/${wanted}.json`];
    promise = loader ? loader().catch(() => null) : Promise.resolve(null);
    loaded.set(wanted, promise);
  }
  return promise;
}

/** The names the snippet's code has for modules: the pre-imports (`jax`, `jnp`, `lax`)
 * and its own `import a.b as c`, `import a`, `from a import b [as c]`. */
export function moduleAliases(code: string): Map<string, string> {
  const aliases = new Map([
    ["jax", "jax"],
    ["jnp", "jax.numpy"],
    ["lax", "jax.lax"],
  ]);
  for (const line of code.split("\n")) {
    let m = /^\s*import\s+(.+)$/.exec(line);
    if (m) {
      for (const part of m[1]!.split(",")) {
        const [, path, alias] = /^\s*([\w.]+)(?:\s+as\s+(\w+))?\s*$/.exec(part.split("#")[0]!) ?? [];
        if (path) aliases.set(alias ?? path.split(".")[0]!, alias ? path : path.split(".")[0]!);
      }
      continue;
    }
    m = /^\s*from\s+([\w.]+)\s+import\s+\(?([^)#]+)/.exec(line);
    if (m) {
      for (const part of m[2]!.split(",")) {
        const [, name, alias] = /^\s*(\w+)(?:\s+as\s+(\w+))?\s*$/.exec(part) ?? [];
        if (name) aliases.set(alias ?? name, `${m[1]}.${name}`);
      }
    }
  }
  return aliases;
}

const KINDS: Record<string, string> = { f: "function", c: "class", m: "namespace", v: "variable" };
const DOTTED = /(?:^|[^\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\.(\w*)$/;

/** What completes the text before the cursor: the members of the module it names
 * (`jnp.li` -> jax.numpy's), from `from` characters into it; null where it names none. */
export function completionsAt(index: CompletionIndex, aliases: Map<string, string>, before: string): { from: number; options: Completion[] } | null {
  const m = DOTTED.exec(before);
  if (!m) return null;
  const [head, ...rest] = m[1]!.split(".");
  const base = aliases.get(head!) ?? head!;
  const members = index.modules[[base, ...rest].join(".")];
  if (!members) return null;
  const options = Object.entries(members).map(([label, [kind, signature, doc]]) => ({
    label,
    type: KINDS[kind] ?? "variable",
    detail: signature,
    info: doc || undefined,
  }));
  return { from: before.length - m[2]!.length, options };
}

/** The editor's source of these completions; `version`: the JAX version runs ask for. */
export function jaxCompletions(version: () => string | undefined): CompletionSource {
  return async (context: CompletionContext): Promise<CompletionResult | null> => {
    const line = context.state.doc.lineAt(context.pos);
    const before = line.text.slice(0, context.pos - line.from);
    if (!DOTTED.test(before)) return null;
    const index = await loadIndex(version());
    if (!index) return null;
    const found = completionsAt(index, moduleAliases(context.state.doc.toString()), before);
    if (!found) return null;
    return { from: line.from + found.from, options: found.options, validFor: /^\w*$/ };
  };
}
