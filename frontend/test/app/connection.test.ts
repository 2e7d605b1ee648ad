// The WebSocket client against a fake socket: opened at page load and kept, one run
// frame per run, a live run let finish (within a grace) rather than cancelled.
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Connection, wsUrl } from "../../src/connection/connection";
import type { RunBody } from "../../src/generated/request";
import { ACCEPTED, DONE, FakeSocket, JAXPR, settle } from "./fakes";

const REQUEST = { code: "def f(x):\n    return x\n", args: "(1.0,)" } as RunBody;

function connect(grace = 200) {
  const seen: string[] = [];
  const conn = new Connection(
    "ws://test/api/v1/ws",
    {
      onEvent: (seq, e) => seen.push(`${seq} ${e.type}`),
      onProblem: (seq, m) => seen.push(`${seq} problem ${m}`),
      onDropped: (seq, why) => seen.push(`${seq} dropped ${why}`),
    },
    { replaceGraceMs: grace, reconnectMs: 50, socket: (u) => new FakeSocket(u) as unknown as WebSocket },
  );
  return { conn, seen };
}

beforeEach(() => {
  FakeSocket.made = [];
  vi.useRealTimers();
});

describe("Connection", () => {
  it("opens its socket when kept, before any run, and sends a run at once on it", async () => {
    const { conn } = connect();
    conn.keep();
    expect(FakeSocket.made).toHaveLength(1);
    FakeSocket.made[0]!.greet();
    await settle();
    void conn.run(REQUEST);
    // sent synchronously: no handshake, no await between the call and the frame
    expect(FakeSocket.made[0]!.runs()).toEqual([1]);
    expect(conn.sent).toBe(1);
  });

  it("shows only the current run's events", async () => {
    const { conn, seen } = connect();
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const seq = await conn.run(REQUEST);
    ws.event(seq, ACCEPTED);
    ws.event(seq, JAXPR);
    ws.event(seq + 7, JAXPR); // not ours
    ws.event(seq, DONE);
    expect(seen).toEqual([`${seq} accepted`, `${seq} jaxpr`, `${seq} done`]);
  });

  it("lets a live run finish instead of cancelling it: the new run waits for its done", async () => {
    const { conn, seen } = connect(5_000);
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const first = await conn.run(REQUEST);
    ws.event(first, ACCEPTED);
    const second = conn.run(REQUEST);
    await settle();
    expect(ws.runs()).toEqual([first]); // held back: no replacing frame, no cancel
    ws.event(first, JAXPR); // the old run's events are no longer shown
    ws.event(first, DONE);
    const seq = await second;
    expect(ws.runs()).toEqual([first, seq]);
    expect(ws.sent.some((m) => m.type === "cancel")).toBe(false);
    expect(seen).toEqual([`${first} accepted`]);
  });

  it("replaces a live run that outlasts the grace (the server cancels it)", async () => {
    const { conn } = connect(30);
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const first = await conn.run(REQUEST);
    const seq = await conn.run(REQUEST);
    expect(ws.runs()).toEqual([first, seq]);
  });

  it("sends only the newest of several runs asked for while one is live", async () => {
    const { conn } = connect(5_000);
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const first = await conn.run(REQUEST);
    const a = conn.run(REQUEST);
    const b = conn.run(REQUEST);
    ws.event(first, DONE);
    await Promise.all([a, b]);
    expect(ws.runs()).toEqual([first, await b]);
  });

  it("cancel sends a cancel for a live run, and drops a held-back one unsent", async () => {
    const { conn } = connect(5_000);
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const first = await conn.run(REQUEST);
    expect(conn.cancel()).toBe(true);
    expect(ws.sent.at(-1)).toEqual({ type: "cancel", seq: first });
    const held = conn.run(REQUEST);
    expect(conn.cancel()).toBe(false);
    ws.event(first, DONE);
    await held;
    expect(ws.runs()).toEqual([first]);
  });

  it("opens again after the server closes it, and says a live run was dropped", async () => {
    const { conn, seen } = connect();
    conn.keep();
    const ws = FakeSocket.made[0]!;
    ws.greet();
    await settle();
    const seq = await conn.run(REQUEST);
    ws.close(1001, "server going away");
    expect(seen).toEqual([`${seq} dropped server going away`]);
    await new Promise((r) => setTimeout(r, 80));
    expect(FakeSocket.made).toHaveLength(2);
    FakeSocket.made[1]!.greet();
    await settle();
    void conn.run(REQUEST);
    expect(FakeSocket.made[1]!.runs()).toEqual([seq + 1]);
  });
});

describe("wsUrl", () => {
  const at = (pathname: string, protocol = "http:") => wsUrl({ protocol, host: "h:8000", pathname });

  it("names the shared link or embed its page was opened from (issue 33)", () => {
    expect(at("/s/abcdefgh234")).toBe("ws://h:8000/api/v1/ws?link=abcdefgh234");
    expect(at("/e/abcdefgh234", "https:")).toBe("wss://h:8000/api/v1/ws?link=abcdefgh234");
  });

  it("names nothing on any other page, or for an id no snippet can have", () => {
    expect(at("/")).toBe("ws://h:8000/api/v1/ws");
    expect(at("/s/short")).toBe("ws://h:8000/api/v1/ws");
    expect(at("/s/ABCDEFGH234")).toBe("ws://h:8000/api/v1/ws");
    expect(at("/s/abcdefgh234/more")).toBe("ws://h:8000/api/v1/ws");
  });
});
