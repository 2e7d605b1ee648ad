// The wire: SPEC §3's WebSocket envelope and §2's events, validated with zod.
// The events' schemas are generated from the server's own models
// (generated/events.ts, made by scripts/gen_event_types.py from
// docs/events.schema.json; CI fails when they drift): typed and bounded as the
// server checks them, undeclared fields dropped. Unknown event types are skipped,
// not errors; the envelope is loose where the server may add fields.
import * as z from "zod/mini";
import { DOC_URL_PREFIXES, Events, Leaf, SourceLine, TimingRow } from "../generated/events";

export { Events };
const int = z.nullish(z.int());
const num = z.nullish(z.number());
const text = z.nullish(z.string());

export const SourceMap = z.array(SourceLine);

/** Whether a link is one the page may show: JAX's (or Python's) documentation. */
export function isDocUrl(url: string | null | undefined): url is string {
  return typeof url === "string" && DOC_URL_PREFIXES.some((prefix) => url.startsWith(prefix));
}

export type EventType = keyof typeof Events;
export type RunEvent = { [K in EventType]: z.infer<(typeof Events)[K]> }[EventType];
export type EventOf<K extends EventType> = z.infer<(typeof Events)[K]>;
export type Sources = z.infer<typeof SourceMap>;
export type ValueLeaf = z.infer<typeof Leaf>;
export type TimingRowT = z.infer<typeof TimingRow>;
export const IR_TYPES = ["jaxpr", "stablehlo", "hlo"] as const;
export type IrType = (typeof IR_TYPES)[number];

const Envelope = z.looseObject({
  type: z.enum(["hello", "event", "error"]),
  seq: z.int(),
  payload: z.optional(z.unknown()),
});

const ErrorPayload = z.looseObject({
  message: z.string(),
  status: int,
  field: text,
  retry_after_s: num,
});

export type ServerMessage =
  | { type: "hello"; seq: number; payload: Record<string, unknown> }
  | { type: "event"; seq: number; event: RunEvent }
  | { type: "error"; seq: number; message: string; status: number | null; field: string | null }
  | { type: "ignored"; seq: number; why: string };

/** Parses one message from the server; never throws. */
export function parseServerMessage(raw: string): ServerMessage | { type: "invalid"; why: string } {
  let data: unknown;
  try {
    data = JSON.parse(raw);
  } catch {
    return { type: "invalid", why: "not JSON" };
  }
  const env = Envelope.safeParse(data);
  if (!env.success) return { type: "invalid", why: z.prettifyError(env.error) };
  const { type, seq, payload } = env.data;
  if (type === "hello") {
    return { type, seq, payload: (payload ?? {}) as Record<string, unknown> };
  }
  if (type === "error") {
    const p = ErrorPayload.safeParse(payload);
    if (!p.success) return { type: "error", seq, message: "the server reported a problem", status: null, field: null };
    return { type, seq, message: p.data.message, status: p.data.status ?? null, field: p.data.field ?? null };
  }
  const parsed = parseEvent(payload);
  if (!parsed.ok) return { type: "ignored", seq, why: parsed.why };
  return { type: "event", seq, event: parsed.event };
}

export function parseEvent(payload: unknown): { ok: true; event: RunEvent } | { ok: false; why: string } {
  const kind = (payload as { type?: unknown } | null)?.type;
  if (typeof kind !== "string" || !Object.hasOwn(Events, kind)) return { ok: false, why: `unknown event type ${String(kind)}` };
  const parsed = Events[kind as EventType].safeParse(payload);
  if (!parsed.success) return { ok: false, why: `${kind}: ${z.prettifyError(parsed.error)}` };
  return { ok: true, event: parsed.data as RunEvent };
}

/** `done`'s status for a run whose code wrote to jaxplay's event channel (sandbox/
 * protocol.py's DONE_STATUSES): its outputs may be forged. */
export const TAMPERED = "tampered";

/** Whether a `done` says the run's outputs may be forged. */
export function isTampered(status: string): boolean {
  return status === TAMPERED;
}

/** The pipeline an event belongs to: "main", or a compare index "0", "1", ... */
export function pipelineOf(event: RunEvent): string {
  return ("pipeline" in event ? event.pipeline : undefined) ?? "main";
}

// --- snippets and backends (HTTP) -------------------------------------------------

export const SnippetCreated = z.looseObject({ id: z.string(), url: z.string() });

export const Backends = z.looseObject({
  backends: z.array(
    z.looseObject({
      name: z.string(),
      backend: text,
      platform: text,
      device_kind: text,
      devices: int,
      jax_version: text,
      queue_length: int,
      versions: z.optional(z.array(z.looseObject({ version: z.string(), installed: z.boolean(), default: z.boolean() }))),
    }),
  ),
  // what the operator offers to compile for without the hardware (absent: an older server)
  gpu_targets: z.optional(z.array(z.string())),
  tpu_topologies: z.optional(z.array(z.string())),
});
export type BackendInfo = z.infer<typeof Backends>["backends"][number];

export const ApiError = z.looseObject({ message: z.string(), field: text, status: int });
