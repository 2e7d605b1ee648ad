// The wire: SPEC §3's WebSocket envelope and §2's events, validated with zod.
// Schemas are loose where the server may add fields (the contract may grow) and
// strict about what the page reads. Unknown event types are skipped, not errors.
import * as z from "zod/mini";

const num = z.nullish(z.number());
const int = z.nullish(z.int());
const text = z.nullish(z.string());

const base = { pipeline: z.optional(z.string()) };

export const SourceMap = z.array(
  z.looseObject({ out_line: z.int(), line: z.int(), eqn: int }),
);

const Leaf = z.looseObject({
  path: z.string(),
  shape: z.array(z.int()),
  dtype: z.string(),
  sha256: text,
  summary: z.nullish(
    z.looseObject({ min: num, max: num, mean: num, nan_count: int, inf_count: int }),
  ),
  data: z.nullish(z.array(z.unknown())),
});

const TimingRow = z.looseObject({
  label: z.string(),
  pipeline: text,
  compile_ms: num,
  runs: int,
  median_ms: num,
  min_ms: num,
  iqr_ms: num,
});

export const Events = {
  accepted: z.looseObject({
    type: z.literal("accepted"),
    ...base,
    run_id: text,
    worker: z.nullish(
      z.looseObject({
        backend: text,
        platform: text,
        device_kind: text,
        devices: int,
        jax_version: text,
      }),
    ),
  }),
  stdout: z.looseObject({ type: z.literal("stdout"), ...base, text: z.string(), stage: text }),
  stderr: z.looseObject({ type: z.literal("stderr"), ...base, text: z.string(), stage: text }),
  stage: z.looseObject({ type: z.literal("stage"), ...base, stage: z.string(), ms: num }),
  jaxpr: z.looseObject({ type: z.literal("jaxpr"), ...base, text: z.string(), sources: z.optional(SourceMap) }),
  stablehlo: z.looseObject({ type: z.literal("stablehlo"), ...base, text: z.string(), sources: z.optional(SourceMap) }),
  hlo: z.looseObject({ type: z.literal("hlo"), ...base, text: z.string(), sources: z.optional(SourceMap) }),
  value: z.looseObject({ type: z.literal("value"), ...base, repr: z.string(), tree: z.array(Leaf) }),
  cost: z.looseObject({
    type: z.literal("cost"),
    ...base,
    flops: num,
    transcendentals: num,
    bytes_accessed: num,
    memory: z.nullish(z.record(z.string(), z.nullish(z.number()))),
  }),
  timing: z.looseObject({ type: z.literal("timing"), ...base, rows: z.array(TimingRow) }),
  error: z.looseObject({
    type: z.literal("error"),
    ...base,
    stage: text,
    kind: z.string(),
    message: z.string(),
    line: int,
    hint: text,
    doc_url: text,
  }),
  done: z.looseObject({ type: z.literal("done"), ...base, status: z.string(), ms: num, reason: text }),
} as const;

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

/** The pipeline an event belongs to: "main", or a compare index "0", "1", ... */
export function pipelineOf(event: RunEvent): string {
  return event.pipeline ?? "main";
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
});
export type BackendInfo = z.infer<typeof Backends>["backends"][number];

export const ApiError = z.looseObject({ message: z.string(), field: text, status: int });
