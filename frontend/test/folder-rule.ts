// The rule between src/'s folders (docs/frontend.md, "The folders and what each may
// import"), as functions of a tree given as its files' texts, so a test can hand it a
// tree that breaks the rule and see it said (test/folders.test.ts).
import { posix } from "node:path";

/** A folder's name ("model") or ROOT, and the folders it may import. */
export interface FolderRule {
  mayImport: Map<string, Set<string>>;
  /** the modules allowed loose at src/'s root: the entry and the composition root */
  rootModules: Set<string>;
}

export const ROOT = "(root)";
const EVERY = "*";

/** The rule as docs/frontend.md's table writes it: the rows after the marker comment,
 * `| \`folder/\` | what | \`a/\`, \`b/\` |`, "—" for none, "every folder" for all; the
 * (root) row's middle cell names the modules allowed at the root. */
export function parseRule(markdown: string): FolderRule {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.includes("<!-- folder rule"));
  if (start < 0) throw new Error("docs/frontend.md: no <!-- folder rule --> table");
  const mayImport = new Map<string, Set<string>>();
  let rootModules = new Set<string>();
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith("|")) {
      if (mayImport.size > 0) break;
      continue;
    }
    const cells = line.split("|").slice(1, -1).map((c) => c.trim());
    if (cells.length !== 3) throw new Error(`docs/frontend.md folder rule: a row of ${cells.length} cells: ${line}`);
    const [folderCell, what, imports] = cells as [string, string, string];
    if (folderCell === "folder" || folderCell.startsWith("---")) continue;
    const folder = folderCell === ROOT ? ROOT : /^`([a-z0-9-]+)\/`$/.exec(folderCell)?.[1];
    if (!folder) throw new Error(`docs/frontend.md folder rule: not a folder: ${folderCell}`);
    const names = [...imports.matchAll(/`([a-z0-9-]+)\/`/g)].map((m) => m[1]!);
    if (imports === "every folder") mayImport.set(folder, new Set([EVERY]));
    else if (imports === "—") mayImport.set(folder, new Set());
    else if (names.length > 0) mayImport.set(folder, new Set(names));
    else throw new Error(`docs/frontend.md folder rule: ${folderCell} may import what? ${imports}`);
    if (folder === ROOT) rootModules = new Set([...what.matchAll(/`([\w.-]+\.ts)`/g)].map((m) => m[1]!));
  }
  if (mayImport.size === 0) throw new Error("docs/frontend.md folder rule: the table has no rows");
  return { mayImport, rootModules };
}

/** A static import or export's specifier, a dynamic import's, a worker's URL. */
const SPECIFIER = /(?:^\s*(?:import|export)\b[^;]*?\bfrom\s*|^\s*import\s*|\bimport\s*\(\s*|\bnew URL\(\s*)"([^"]+)"/gm;

export function specifiers(text: string): string[] {
  return [...text.matchAll(SPECIFIER)].map((m) => m[1]!);
}

/** The folder a path under src/ is in: its first segment, or ROOT. */
export function folderOf(path: string): string {
  const slash = path.indexOf("/");
  return slash < 0 ? ROOT : path.slice(0, slash);
}

/** The file under src/ a relative specifier names (the module resolution the bundler
 * does: as written, with .ts, a folder's index.ts); null for a package or a file outside
 * src/ (examples/, tour/: data read at build time). */
export function resolve(files: ReadonlyMap<string, string>, from: string, spec: string): string | null {
  if (!spec.startsWith("./") && !spec.startsWith("../")) return null;
  const path = posix.normalize(posix.join(posix.dirname(from), spec.replace(/\?.*$/, "")));
  if (path.startsWith("../")) return null;
  for (const candidate of [path, `${path}.ts`, `${path}/index.ts`]) if (files.has(candidate)) return candidate;
  throw new Error(`${from}: "${spec}" names no file under src/`);
}

/** What breaks the rule in `files` (path under src/ -> text; every file, modules and
 * data): an import between folders the rule does not allow, a module loose at the root
 * that the rule does not name, a folder the rule has no row for. Imports of data (.json,
 * .css, raw text) are not counted: a data file is not a module of a folder. */
export function ruleBreaks(files: ReadonlyMap<string, string>, rule: FolderRule): string[] {
  const breaks: string[] = [];
  for (const [path, text] of files) {
    if (!path.endsWith(".ts")) continue;
    const folder = folderOf(path);
    const allowed = rule.mayImport.get(folder);
    if (allowed === undefined) {
      breaks.push(`${path}: the folder ${folder}/ has no row in docs/frontend.md's folder rule`);
      continue;
    }
    if (folder === ROOT && !rule.rootModules.has(path)) breaks.push(`${path}: loose at src/'s root (only ${[...rule.rootModules].join(", ")} may be)`);
    for (const spec of specifiers(text)) {
      const target = resolve(files, path, spec);
      if (target === null || !target.endsWith(".ts")) continue;
      const to = folderOf(target);
      if (to !== folder && !allowed.has(EVERY) && !allowed.has(to)) breaks.push(`${path} imports ${target}: ${folder}/ may not import ${to}/`);
    }
  }
  return breaks;
}

/** Module names used more than once across src/'s folders: a name says one thing. */
export function repeatedStems(paths: Iterable<string>): string[] {
  const byStem = new Map<string, string[]>();
  for (const path of paths) {
    if (!path.endsWith(".ts")) continue;
    const stem = posix.basename(path, ".ts");
    byStem.set(stem, [...(byStem.get(stem) ?? []), path]);
  }
  return [...byStem.values()].filter((ps) => ps.length > 1).map((ps) => ps.join(" and "));
}
