// The logic of the passes pane, apart from the DOM: rebuilding each pass's module
// text (items may carry a unified diff from the one before instead of text),
// telling a pass that changed only metadata, and filtering the list.
import type { EventOf, Sources } from "../connection/protocol";

export type PassItem = EventOf<"passes">["items"][number];

export interface PassText {
  index: number;
  pipeline: string;
  pass: string;
  text: string;
  /** the item's own source map (empty for a text rebuilt from a diff) */
  sources: Sources;
}

/** Applies a unified diff (as Python's difflib writes it) to `base`. Throws when a
 * hunk does not match: a text shown wrong would be worse than none. */
export function applyUnifiedDiff(base: string, diff: string): string {
  const lines = base.split("\n");
  const out: string[] = [];
  let at = 0; // next line of `lines` not yet copied
  const hunks = diff.split("\n");
  for (let i = 0; i < hunks.length; i++) {
    const head = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@/.exec(hunks[i]!);
    if (!head) continue;
    const oldCount = head[2] === undefined ? 1 : Number(head[2]);
    // difflib numbers an empty range by the line before it
    const start = oldCount === 0 ? Number(head[1]) : Number(head[1]) - 1;
    while (at < start) out.push(lines[at++]!);
    for (i++; i < hunks.length && !hunks[i]!.startsWith("@@"); i++) {
      const line = hunks[i]!;
      const body = line.slice(1);
      if (line.startsWith(" ") || line.startsWith("-")) {
        if (lines[at] !== body) throw new Error(`the diff does not apply at line ${at + 1}`);
        at++;
        if (line.startsWith(" ")) out.push(body);
      } else if (line.startsWith("+")) {
        out.push(body);
      }
    }
    i--;
  }
  while (at < lines.length) out.push(lines[at++]!);
  return out.join("\n");
}

/** Every item's module text, in order. */
export function passTexts(items: readonly PassItem[]): PassText[] {
  const texts: PassText[] = [];
  let previous = "";
  items.forEach((item, index) => {
    const text = item.text ?? (item.diff != null ? applyUnifiedDiff(previous, item.diff) : previous);
    texts.push({ index, pipeline: item.pipeline, pass: item.pass, text, sources: item.text != null ? (item.sources ?? []) : [] });
    previous = text;
  });
  return texts;
}

const METADATA = /,? ?metadata=\{[^{}]*\}/g;

/** Whether a pass changed only the instructions' metadata (op names, source lines). */
export function metadataOnly(before: string, after: string): boolean {
  return before !== after && before.replace(METADATA, "") === after.replace(METADATA, "");
}

/** The passes to list: those whose pipeline or name contains `query` (any case);
 * with `hideMetadataOnly`, not those that changed only metadata. The first item
 * (the module before optimisation) is always listed. */
export function filterPasses(texts: readonly PassText[], query: string, hideMetadataOnly: boolean): PassText[] {
  const q = query.trim().toLowerCase();
  return texts.filter((t, i) => {
    if (i === 0) return true;
    if (q && !`${t.pipeline} ${t.pass}`.toLowerCase().includes(q)) return false;
    return !(hideMetadataOnly && metadataOnly(texts[i - 1]!.text, t.text));
  });
}

/** Counts of lines removed and added between two texts (a pass's size of change). */
export function changedLines(before: string, after: string): { removed: number; added: number } {
  const count = (lines: string[]) => {
    const m = new Map<string, number>();
    for (const l of lines) m.set(l, (m.get(l) ?? 0) + 1);
    return m;
  };
  const a = count(before.split("\n"));
  const b = count(after.split("\n"));
  let removed = 0;
  let added = 0;
  for (const [l, n] of a) removed += Math.max(0, n - (b.get(l) ?? 0));
  for (const [l, n] of b) added += Math.max(0, n - (a.get(l) ?? 0));
  return { removed, added };
}

/** XLA flags as typed in the page (`name=value`, separated by spaces or lines, as
 * XLA_FLAGS spells them: a value may hold commas, `xla_disable_hlo_passes=a,b`; a
 * bare name is `true`) into a request's `compiler_options`: `true`/`false`
 * are booleans, whole numbers integers, anything else a string. The server checks
 * the names against its allow-list; this only refuses what cannot be a flag. */
export function parseFlags(text: string): { options: Record<string, boolean | number | string>; problems: string[] } {
  const options: Record<string, boolean | number | string> = {};
  const problems: string[] = [];
  for (const part of text.split(/\s+/).filter(Boolean)) {
    const eq = part.indexOf("=");
    const name = (eq < 0 ? part : part.slice(0, eq)).replace(/^--/, "");
    const raw = eq < 0 ? "true" : part.slice(eq + 1);
    if (!/^xla_[a-z0-9_]+$/.test(name)) {
      problems.push(`${name || part} is not an XLA flag (xla_…)`);
      continue;
    }
    options[name] = raw === "true" ? true : raw === "false" ? false : /^-?\d+$/.test(raw) ? Number(raw) : raw;
  }
  return { options, problems };
}

/** `compiler_options` back into the text `parseFlags` reads (a stored request). */
export function flagsText(options: unknown): string {
  if (!options || typeof options !== "object") return "";
  return Object.entries(options as Record<string, unknown>)
    .filter(([, v]) => ["boolean", "number", "string"].includes(typeof v))
    .map(([k, v]) => (v === true ? k : `${k}=${String(v)}`))
    .join(" ");
}
