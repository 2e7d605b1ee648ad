// The zod schemas against real engine output (fixtures made with `jaxplay run --json`).
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseEvent, parseServerMessage } from "../src/protocol";

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
