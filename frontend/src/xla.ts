// The logic of the passes pane, apart from the DOM: rebuilding each pass's module
// text (items may carry a unified diff from the one before instead of text),
// telling a pass that changed only metadata, and filtering the list.
import type { EventOf, Sources } from "./protocol";

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
