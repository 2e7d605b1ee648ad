// The JAX libraries a version offers (GET /api/v1/backends: each version's
// `libraries`, from sandbox/environments/libraries.py's table and the version's lock), as the
// "libraries" popover beside the JAX version picker shows them, and the import line
// each one is conventionally written with. Pure functions: controls/libraries-popover.ts draws them.
import * as z from "zod/mini";

/** The conventional import of each library of the curated set (sandbox/environments/libraries.py),
 * by pip's name: what "insert import" adds at the top of the code. The one table of
 * these spellings in the page. */
export const IMPORTS: Readonly<Record<string, string>> = {
  flax: "from flax import nnx",
  optax: "import optax",
  equinox: "import equinox as eqx",
  chex: "import chex",
  jaxtyping: "from jaxtyping import Array, Float",
  beartype: "from beartype import beartype",
  einops: "import einops",
  diffrax: "import diffrax",
  lineax: "import lineax as lx",
  optimistix: "import optimistix as optx",
  numpyro: "import numpyro",
  distrax: "import distrax",
  "dm-haiku": "import haiku as hk",
  treescope: "import treescope",
  penzai: "from penzai import pz",
  ml_dtypes: "import ml_dtypes",
};

/** The import line for a library: the table's, else `import <name>` (a library an
 * operator added: pip's name with `-` as `_`). */
export function importLine(name: string): string {
  return IMPORTS[name] ?? `import ${name.replace(/-/g, "_")}`;
}

/** Where `line` goes in `code`: after a leading shebang, encoding line, comments,
 * a module docstring and `from __future__` imports (which must come first), before
 * anything else (past blank lines, when the code's own imports follow them). null
 * when the code already has the line. */
export function importInsertion(code: string, line: string): { at: number; insert: string } | null {
  const lines = code.split("\n");
  if (lines.some((l) => l.trim() === line)) return null;
  let i = 0;
  let at = 0;
  const advance = (): void => {
    at += lines[i]!.length + 1;
    i++;
  };
  while (i < lines.length) {
    const t = lines[i]!.trim();
    if (t.startsWith("#") || t.startsWith("from __future__ ")) {
      advance();
      continue;
    }
    const doc = /^[rRuU]?("""|''')/.exec(t);
    if (doc) {
      const quote = doc[1]!;
      const body = t.slice(doc[0].length);
      if (body.includes(quote)) {
        advance();
        continue;
      }
      const start = i;
      advance();
      while (i < lines.length && !lines[i]!.includes(quote)) advance();
      if (i >= lines.length) {
        // an unterminated docstring: insert at the top rather than inside it
        i = start;
        at = lines.slice(0, start).reduce((a, l) => a + l.length + 1, 0);
        break;
      }
      advance();
      continue;
    }
    break;
  }
  // past blank lines to the code's own imports, when they come next: the line joins them
  let j = i;
  let atImports = at;
  while (j < lines.length && lines[j]!.trim() === "") atImports += lines[j++]!.length + 1;
  if (j > i && j < lines.length && /^(import|from)\s/.test(lines[j]!)) at = atImports;
  if (at > code.length) return { at: code.length, insert: `\n${line}\n` };
  return { at, insert: `${line}\n` };
}

/** `code` with the library's import added (unchanged when it is there). */
export function withImport(code: string, name: string): string {
  const ins = importInsertion(code, importLine(name));
  return ins ? code.slice(0, ins.at) + ins.insert + code.slice(ins.at) : code;
}

// --- what the backends response says -----------------------------------------------

const Library = z.looseObject({
  name: z.string(),
  version: z.string(),
  what: z.optional(z.string()),
  /** other versions of it a request may pick (`libraries`); `version` is the default */
  alternatives: z.optional(z.array(z.string())),
});
const NotOffered = z.looseObject({ name: z.string(), reason: z.optional(z.string()), what: z.optional(z.string()) });
const Version = z.looseObject({
  version: z.string(),
  default: z.optional(z.boolean()),
  libraries: z.optional(z.array(Library)),
  /** a library of the curated set this version does not offer, with pip's reason
   * (not sent by today's server: a version without a library is read as not offering it) */
  libraries_not_offered: z.optional(z.array(NotOffered)),
});
export type LibraryVersion = z.infer<typeof Version>;

/** The versions of a backends response's `versions` that say their libraries (an
 * older server says none: []). Anything malformed is left out, never thrown. */
export function versionsWithLibraries(versions: readonly unknown[]): LibraryVersion[] {
  const out: LibraryVersion[] = [];
  for (const v of versions) {
    const parsed = Version.safeParse(v);
    if (parsed.success) out.push(parsed.data);
  }
  return out;
}

/** One row of the popover. */
export interface LibraryRow {
  name: string;
  /** the version this JAX offers ("" when it offers none) */
  version: string;
  what: string;
  importLine: string;
  /** not offered by the selected JAX version: shown greyed, with `reason` */
  offered: boolean;
  reason: string;
  /** what the last run's worker had, where it differs from the version picked ("" otherwise) */
  workerVersion: string;
  /** other versions of it a run may pick (the operator's alternatives; [] for none) */
  alternatives: string[];
  /** the alternative picked for the next runs ("" = `version`, the default) */
  chosen: string;
}

export interface LibrariesView {
  /** the JAX version shown ("default" names the server's default by its number) */
  title: string;
  rows: LibraryRow[];
  /** a line under the rows: the last run's worker and how it compares */
  note: string;
}

/** The popover's content for the picker's `selected` version ("" = the default),
 * with the libraries every other version offers listed greyed where this one does
 * not, and what the last run's worker had (`accepted.worker.libraries`, with the JAX
 * version it ran) where it differs; `picks`: the alternatives picked for the next runs
 * (a request's `libraries`). */
export function librariesView(
  versions: readonly LibraryVersion[],
  selected: string,
  worker: { jaxVersion: string; libraries: Record<string, string> } | null = null,
  picks: Readonly<Record<string, string>> = {},
): LibrariesView {
  const chosen = selectedVersion(versions, selected);
  if (!chosen) {
    const known = versions.length > 0;
    return {
      title: selected ? `jax ${selected}` : "jax (default)",
      rows: [],
      note: known ? `This server does not offer JAX ${selected || "(default)"}: no libraries listed.` : "This server lists no libraries.",
      ...(worker ? workerOnly(worker) : {}),
    };
  }
  const what = new Map<string, string>();
  const order: string[] = [];
  for (const v of versions) {
    for (const lib of [...(v.libraries ?? []), ...(v.libraries_not_offered ?? [])]) {
      if (!order.includes(lib.name)) order.push(lib.name);
      if (lib.what && !what.has(lib.name)) what.set(lib.name, lib.what);
    }
  }
  const offered = new Map((chosen.libraries ?? []).map((l) => [l.name, l.version]));
  const alternatives = new Map((chosen.libraries ?? []).map((l) => [l.name, l.alternatives ?? []]));
  const reasons = new Map((chosen.libraries_not_offered ?? []).map((l) => [l.name, l.reason ?? ""]));
  const sameJax = worker !== null && worker.jaxVersion === chosen.version;
  const rows = order.map((name): LibraryRow => {
    const version = offered.get(name) ?? "";
    const others = alternatives.get(name) ?? [];
    const picked = others.includes(picks[name] ?? "") ? picks[name]! : "";
    const had = sameJax ? (worker!.libraries[name] ?? "") : "";
    return {
      name,
      version,
      what: what.get(name) ?? "",
      importLine: importLine(name),
      offered: offered.has(name),
      reason: offered.has(name) ? "" : reasons.get(name) || (offered.size ? `not in JAX ${chosen.version}'s library lock` : `JAX ${chosen.version} has no library lock: it offers none`),
      workerVersion: had && had !== (picked || version) ? had : "",
      alternatives: others,
      chosen: picked,
    };
  });
  let note = "";
  if (worker && sameJax) {
    const differ = rows.filter((r) => r.workerVersion).length;
    const missing = rows.filter((r) => r.offered && !(r.name in worker.libraries)).map((r) => r.name);
    const parts = [];
    if (differ) parts.push(`${differ} at another version (marked)`);
    if (missing.length) parts.push(`without ${missing.join(", ")}`);
    note = parts.length ? `The last run's worker had ${parts.join("; ")}.` : "The last run's worker had these versions.";
  } else if (worker) note = `The last run ran JAX ${worker.jaxVersion || "?"}, not ${chosen.version}.`;
  return { title: `jax ${chosen.version}${chosen.default ? " (default)" : ""}`, rows, note };
}

function selectedVersion(versions: readonly LibraryVersion[], selected: string): LibraryVersion | undefined {
  return selected ? versions.find((v) => v.version === selected) : versions.find((v) => v.default);
}

/** The picks (`libraries` of a request: name -> version) that the picker's `selected`
 * JAX version offers as alternatives; the others dropped (another version offers
 * other ones). Unchanged while the server's versions are not known yet. */
export function keptChoices(versions: readonly LibraryVersion[], selected: string, chosen: Readonly<Record<string, string>>): Record<string, string> {
  if (versions.length === 0) return { ...chosen };
  const libs = selectedVersion(versions, selected)?.libraries ?? [];
  const kept: Record<string, string> = {};
  for (const [name, version] of Object.entries(chosen)) {
    if (libs.some((l) => l.name === name && (l.alternatives ?? []).includes(version))) kept[name] = version;
  }
  return kept;
}

/** `chosen` with library `name` at `version`: "" (or the default) drops it. */
export function withChoice(chosen: Readonly<Record<string, string>>, name: string, version: string): Record<string, string> {
  const next = { ...chosen };
  if (version) next[name] = version;
  else delete next[name];
  return next;
}

function workerOnly(worker: { jaxVersion: string; libraries: Record<string, string> }): Pick<LibrariesView, "rows" | "note"> {
  const rows = Object.entries(worker.libraries).map(([name, version]): LibraryRow => ({ name, version, what: "", importLine: importLine(name), offered: true, reason: "", workerVersion: "", alternatives: [], chosen: "" }));
  return { rows, note: `The last run's worker (JAX ${worker.jaxVersion || "?"}) had these.` };
}
