// The zod schemas against real engine output (fixtures made with `jaxplay run --json`).
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isDocUrl, parseEvent, parseServerMessage } from "../src/connection/protocol";

const dir = join(import.meta.dirname, "fixtures");
const fixtures = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));

function events(name: string): unknown[] {
  return readFileSync(join(dir, name), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

describe("events", () => {
  it.each(fixtures)("every event of %s validates", (name) => {
    for (const e of events(name)) {
      const parsed = parseEvent(e);
      expect(parsed.ok, JSON.stringify(parsed)).toBe(true);
    }
  });

  it("keeps what the panes read", () => {
    const all = events("grad_jit_compare.jsonl").map((e) => parseEvent(e));
    const jaxpr = all.find((p) => p.ok && p.event.type === "jaxpr");
    expect(jaxpr?.ok && jaxpr.event.type === "jaxpr" && jaxpr.event.sources?.[0]).toMatchObject({ out_line: 5, line: 4 });
    const timing = all.find((p) => p.ok && p.event.type === "timing");
    expect(timing?.ok && timing.event.type === "timing" && timing.event.rows.map((r) => r.pipeline)).toEqual(["main", "main", "0"]);
  });

  it("skips unknown event types and rejects malformed known ones", () => {
    expect(parseEvent({ type: "brand-new", x: 1 }).ok).toBe(false);
    expect(parseEvent({ type: "jaxpr", text: 3 }).ok).toBe(false);
    expect(parseEvent(null).ok).toBe(false);
  });
});

describe("the generated schemas hold the server's bounds", () => {
  it("drops undeclared fields", () => {
    const parsed = parseEvent({ type: "stdout", text: "hi", stage: "exec", evil: [1, 2], cached: true });
    expect(parsed.ok && parsed.event).toEqual({ type: "stdout", text: "hi", stage: "exec" });
  });

  it("refuses what the server refuses", () => {
    const error = { type: "error", stage: "exec", kind: "X", message: "m", line: null, hint: null };
    expect(parseEvent({ ...error, doc_url: "https://docs.jax.dev/en/latest/errors.html" }).ok).toBe(true);
    expect(parseEvent({ ...error, doc_url: "https://evil.example/docs.jax.dev/" }).ok).toBe(false);
    expect(parseEvent({ ...error, doc_url: "javascript:alert(1)" }).ok).toBe(false);
    expect(parseEvent({ type: "stage", stage: "invented", ms: 1 }).ok).toBe(false);
    expect(parseEvent({ type: "stage", stage: "exec", ms: -1 }).ok).toBe(false);
    expect(parseEvent({ type: "stdout", text: "x".repeat(16 * 1024 + 1) }).ok).toBe(false);
    expect(parseEvent({ type: "jaxpr", text: "", sources: [], pipeline: "9" }).ok).toBe(false);
  });

  it("reads NaN and infinities by name in values", () => {
    const leaf = { path: "", shape: [2], dtype: "float32", sha256: null, data: ["nan", "inf"] };
    const summary = { min: "nan", max: "nan", mean: "nan", nan_count: 1, inf_count: 1 };
    expect(parseEvent({ type: "value", repr: "", tree: [{ ...leaf, summary }] }).ok).toBe(true);
  });

  it("links only to JAX's and Python's documentation", () => {
    expect(isDocUrl("https://docs.jax.dev/en/latest/jit.html")).toBe(true);
    expect(isDocUrl("https://jax.readthedocs.io/en/latest/")).toBe(true);
    expect(isDocUrl("https://docs.python.org/3/reference/grammar.html")).toBe(true);
    expect(isDocUrl("https://docs.jax.dev.evil.example/")).toBe(false);
    expect(isDocUrl("http://docs.jax.dev/")).toBe(false);
    expect(isDocUrl(null)).toBe(false);
  });
});

describe("envelope", () => {
  it("reads hello, events, errors", () => {
    expect(parseServerMessage('{"type":"hello","seq":-1,"payload":{"version":1}}')).toMatchObject({ type: "hello", seq: -1 });
    expect(parseServerMessage('{"type":"event","seq":3,"payload":{"type":"done","status":"ok","ms":1,"reason":""}}')).toMatchObject({
      type: "event",
      seq: 3,
      event: { type: "done", status: "ok" },
    });
    expect(parseServerMessage('{"type":"error","seq":2,"payload":{"message":"bad","status":422,"field":"args"}}')).toEqual({
      type: "error",
      seq: 2,
      message: "bad",
      status: 422,
      field: "args",
    });
  });

  it("never throws on garbage", () => {
    expect(parseServerMessage("not json").type).toBe("invalid");
    expect(parseServerMessage('{"type":"nope","seq":1}').type).toBe("invalid");
    expect(parseServerMessage('{"type":"event","seq":1,"payload":{"type":"mystery"}}').type).toBe("ignored");
  });
});
