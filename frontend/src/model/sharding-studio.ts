// The sharding studio's page logic (issue 14): the mesh builder's and PartitionSpec
// boxes' text as request JSON, pmap's shard_map form, and what the sharding pane
// draws (each array's blocks as rectangles, a colour per device, the collectives).
// Pure: no DOM, unit-tested (test/sharding.test.ts).
import { MeshSpec, type RunRequest } from "../generated/request";
import { parsedOrNull } from "../util/narrow";
import type { EventOf } from "../connection/protocol";
import type { Json } from "./json";

/** A mesh axis's type, as the server's MeshSpec has it. */
export type AxisType = NonNullable<MeshSpec["axis_types"]>[number];
export const AXIS_TYPES: readonly AxisType[] = ["auto", "explicit", "manual"];

/** The mesh as the page keeps it: what the user typed in the builder. */
export interface MeshState {
  /** `2, 2` */
  shape: string;
  /** `x, y` */
  names: string;
  /** one per axis */
  types: AxisType[];
}

/** What the page keeps of sharding besides the mesh: one PartitionSpec text per
 * argument (`x, None`, `P('x', None)`; empty: replicated) and one for the outputs. */
export interface ShardingState {
  mesh: MeshState | null;
  inShardings: string[];
  outShardings: string;
}

export class SpecError extends Error {}

/** The request's `mesh` as the page makes it: every axis's type given. */
export type MeshJson = MeshSpec & { axis_types: AxisType[] };
/** One JSON PartitionSpec, as the request's `in_shardings`/`out_shardings` hold them. */
export type PartitionSpecJson = NonNullable<NonNullable<RunRequest["in_shardings"]>[number]>;
/** The request's sharding fields. */
export type ShardingFields = Pick<RunRequest, "mesh" | "in_shardings" | "out_shardings">;

/** A Python name, as an axis name must be. */
export const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

/** The builder's text as the request's `mesh`; throws SpecError saying what is wrong. */
export function meshToJson(mesh: MeshState): MeshJson {
  const shape = mesh.shape.split(/[,x×\s]+/).filter(Boolean).map((s) => {
    if (!/^\d+$/.test(s) || Number(s) < 1) throw new SpecError(`mesh shape: ${s} is not a positive whole number`);
    return Number(s);
  });
  const names = mesh.names.split(/[,\s]+/).map((s) => s.replace(/^['"]|['"]$/g, "")).filter(Boolean);
  if (shape.length === 0 || shape.length > 4) throw new SpecError("mesh shape: 1 to 4 sizes, like 2, 2");
  if (names.length !== shape.length) throw new SpecError(`mesh: ${shape.length} sizes but ${names.length} axis names`);
  for (const n of names) if (!IDENT.test(n)) throw new SpecError(`mesh: ${n} is not a Python name`);
  if (new Set(names).size !== names.length) throw new SpecError("mesh: an axis name is repeated");
  const types = shape.map((_, i) => mesh.types[i] ?? "auto");
  return { shape, axis_names: names, axis_types: types };
}

export function meshSize(mesh: MeshJson): number {
  return mesh.shape.reduce((a, b) => a * b, 1);
}

/** `x, None` / `P('x', None)` / `('x', 'y'), None` / `[]` as a JSON PartitionSpec;
 * empty text or `None` alone: null (replicated). Axis names are checked against the mesh. */
export function parseSpec(text: string, axes: readonly string[] | null): PartitionSpecJson | null {
  let src = text.trim();
  const wrapped = /^(?:P|PartitionSpec)\s*\((.*)\)$/s.exec(src);
  if (wrapped) src = wrapped[1]!.trim();
  else if (/^\[.*\]$/s.test(src)) src = src.slice(1, -1).trim();
  if (src === "" && !wrapped && text.trim() !== "[]") return null;
  if (src === "None" && !wrapped) return null;
  const entries: PartitionSpecJson = [];
  const used = new Set<string>();
  const name = (raw: string): string => {
    const n = raw.trim().replace(/^['"]|['"]$/g, "");
    if (!IDENT.test(n)) throw new SpecError(`${raw.trim() || "(empty)"} is not an axis name`);
    if (axes && !axes.includes(n)) throw new SpecError(`${n} is not an axis of the mesh (${axes.join(", ") || "no mesh"})`);
    if (used.has(n)) throw new SpecError(`${n} is used twice`);
    used.add(n);
    return n;
  };
  const re = /\s*(\([^()]*\)|\[[^[\]]*\]|[^,()[\]]+)\s*(,|$)/gy;
  let m: RegExpExecArray | null;
  let pos = 0;
  while (pos < src.length && (m = re.exec(src)) !== null) {
    const item = m[1]!.trim();
    if (item === "None" || item === "null") entries.push(null);
    else if (/^[([]/.test(item)) entries.push(item.slice(1, -1).split(",").filter((s) => s.trim()).map(name));
    else entries.push(name(item));
    pos = re.lastIndex;
    if (m[2] === "") break;
  }
  if (pos < src.length) throw new SpecError(`cannot read ${JSON.stringify(src.slice(pos))}: write it like x, None`);
  return entries;
}

/** A JSON PartitionSpec as the page writes it back: `P('x', None)`. */
export function formatSpec(spec: Json[] | null | undefined): string {
  if (spec == null) return "P()  (replicated)";
  const entry = (e: Json): string => (e === null ? "None" : Array.isArray(e) ? `(${e.map((n) => `'${String(n)}'`).join(", ")})` : `'${String(e)}'`);
  return `P(${spec.map(entry).join(", ")})`;
}

export interface ShardingProblem {
  field: string;
  message: string;
}

/** The request's sharding fields, with problems listed (not thrown). */
export function shardingRequest(state: ShardingState, problems: ShardingProblem[] = []): ShardingFields {
  if (!state.mesh) return {};
  let mesh: MeshJson;
  try {
    mesh = meshToJson(state.mesh);
  } catch (e) {
    problems.push({ field: "mesh", message: (e as Error).message });
    return {};
  }
  const out: ShardingFields = { mesh };
  const specs: (PartitionSpecJson | null)[] = [];
  state.inShardings.forEach((text, i) => {
    try {
      specs.push(parseSpec(text, mesh.axis_names));
    } catch (e) {
      problems.push({ field: `in_shardings[${i}]`, message: (e as Error).message });
    }
  });
  if (state.inShardings.some((t) => t.trim() !== "")) out.in_shardings = specs;
  if (state.outShardings.trim() !== "") {
    try {
      out.out_shardings = [parseSpec(state.outShardings, mesh.axis_names)];
    } catch (e) {
      problems.push({ field: "out_shardings", message: (e as Error).message });
    }
  }
  return out;
}

/** A stored request's sharding fields back into page state (lenient). */
export function shardingFromRequest(d: Record<string, unknown>): ShardingState {
  const mesh = parsedOrNull(MeshSpec, d.mesh);
  const spec = (s: unknown): string => (Array.isArray(s) ? formatSpec(s as Json[]).replace(/^P\(\)  \(replicated\)$/, "") : "");
  return {
    mesh:
      mesh !== null
        ? {
            shape: mesh.shape.join(", "),
            names: mesh.axis_names.join(", "),
            types: mesh.axis_types ?? [],
          }
        : null,
    inShardings: Array.isArray(d.in_shardings) ? d.in_shardings.map(spec) : [],
    outShardings: Array.isArray(d.out_shardings) && d.out_shardings.length > 0 ? spec(d.out_shardings[0]) : "",
  };
}

/** `src` split at its top-level commas (not those inside brackets). */
export function splitTopLevel(src: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of src) {
    if (ch === "(" || ch === "[") depth++;
    if (ch === ")" || ch === "]") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur.trim()) parts.push(cur);
  return parts;
}

/** A list of PartitionSpec texts (`P('x'), P()`) as a transform option: [["x"], []]. */
export function parseSpecList(text: string, axes: readonly string[] | null = null): Json[] {
  const items = splitTopLevel(text.trim().replace(/^\[(.*)\]$/s, "$1"));
  if (items.length === 0) throw new SpecError("expected PartitionSpecs: P('x'), P()");
  return items.map((item) => parseSpec(item.trim() === "" ? "P()" : item, axes) ?? []);
}

// --- the sharding pane -----------------------------------------------------------------

export type ShardingEvent = EventOf<"sharding">;
export type ShardedArray = ShardingEvent["arguments"][number];
export type CollectiveRow = ShardingEvent["collectives"][number];

export interface Cell {
  /** fractions of the drawn width and height, 0..1 */
  x: number;
  y: number;
  w: number;
  h: number;
  devices: number[];
  /** `[0:4, 2:4]` */
  label: string;
}

/** An array's blocks as rectangles: rows are its first dimension, columns its
 * second (a 1-D array is one row; further dimensions are not drawn: the blocks of
 * one (row, column) overlap and are listed together). */
export function gridCells(array: ShardedArray): Cell[] {
  const shape = array.shape;
  const rows = shape.length >= 2 ? shape[0]! : 1;
  const cols = shape.length >= 2 ? shape[1]! : (shape[0] ?? 1);
  const cells = new Map<string, Cell>();
  for (const block of array.grid) {
    const [r0, r1] = shape.length >= 2 ? [block.start[0]!, block.stop[0]!] : [0, 1];
    const [c0, c1] = shape.length >= 2 ? [block.start[1]!, block.stop[1]!] : shape.length === 1 ? [block.start[0]!, block.stop[0]!] : [0, 1];
    const key = `${r0}:${r1}/${c0}:${c1}`;
    const seen = cells.get(key);
    if (seen) {
      seen.devices = [...new Set([...seen.devices, ...block.devices])].sort((a, b) => a - b);
      continue;
    }
    const label = shape.length === 0 ? "scalar" : `[${block.start.map((s, i) => `${s}:${block.stop[i]}`).join(", ")}]`;
    cells.set(key, { x: c0 / Math.max(cols, 1), y: r0 / Math.max(rows, 1), w: (c1 - c0) / Math.max(cols, 1), h: (r1 - r0) / Math.max(rows, 1), devices: [...block.devices], label });
  }
  return [...cells.values()];
}

/** A colour per device, spread around the hue circle; the same id always gets the same one. */
export function deviceColour(id: number, devices: number): string {
  const n = Math.max(devices, 1);
  const hue = Math.round(((id % n) * 360) / n + (id >= n ? 17 : 0)) % 360;
  return `hsl(${hue} 65% 62%)`;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

export interface OriginView {
  /** `argument a`, `with_sharding_constraint`, `output [0]` */
  label: string;
  sharding: string;
  line: number | null;
  /** the mesh axes whose sharding came from it: `x, y` */
  axes: string;
}

export interface CollectiveView {
  kind: string;
  bytes: string;
  groups: string;
  line: number | null;
  hloLine: number;
  why: string;
  /** the shardings that meet where it is (Shardy's origins); null: not reported */
  origin: { from: OriginView[]; to: OriginView[]; written: boolean } | null;
}

type Origin = NonNullable<CollectiveRow["origin"]>["to"][number];

function originView(o: Origin): OriginView {
  const label = o.kind === "argument" ? `argument ${o.name}` : o.kind === "output" ? `output ${o.name}` : o.kind === "constraint" ? o.name : `${o.name} (unknown)`;
  return { label, sharding: o.sharding ?? "", line: o.line ?? null, axes: (o.axes ?? []).join(", ") };
}

/** One side of a collective's origin as text: `argument a P('x', None) (line 2)`. */
export function originText(views: readonly OriginView[]): string {
  if (views.length === 0) return "—";
  return views.map((v) => `${v.label} ${v.sharding}${v.line !== null ? ` (line ${v.line})` : ""}`).join("; ");
}

export interface RematView {
  line: number | null;
  opName: string;
  from: string;
  to: string;
  message: string;
}

/** XLA's involuntary full rematerializations, as the pane lists them. */
export function rematerializationRows(event: ShardingEvent): RematView[] {
  return (event.rematerializations ?? []).map((r) => ({ line: r.line ?? null, opName: r.op_name, from: r.from_sharding, to: r.to_sharding, message: r.message }));
}

/** The collectives table's rows, and the total bytes moved per device. */
export function collectiveRows(event: ShardingEvent): { rows: CollectiveView[]; total: string } {
  let total = 0;
  const rows = event.collectives.map((c: CollectiveRow) => {
    total += c.bytes;
    const groups = c.replica_groups ? c.replica_groups.map((g) => `{${g.join(",")}}`).join(" ") : c.groups_text;
    return {
      kind: c.kind,
      bytes: formatBytes(c.bytes),
      groups,
      line: c.line ?? null,
      hloLine: c.hlo_line,
      why: c.line == null ? "added by the partitioner (an argument's or output's sharding)" : "",
      origin: c.origin ? { from: c.origin.from.map(originView), to: c.origin.to.map(originView), written: c.origin.written ?? false } : null,
    };
  });
  return { rows, total: formatBytes(total) };
}
