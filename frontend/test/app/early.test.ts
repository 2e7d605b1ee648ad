// A new link's run sent by the page's first script (backend/app/web/early_run.py): the run
// the server puts in the page is the one the page sends (the cases of
// fixtures/early-run.json, which tests/server/test_early_run.py holds the server to),
// and the page adopts the socket and run that script left: the messages that came
// before replayed, seq continued, a different request dropping the early run.
import { readFileSync } from "node:fs";
import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { DEFAULT_STATE } from "../../src/model/examples";
import type { RunBody } from "../../src/generated/request";
import { TransformName } from "../../src/generated/request";
import { fromRequest, toRequest } from "../../src/model/state";
import type { StepProblem } from "../../src/model/transforms";
import { ACCEPTED, DONE, FakeSocket, JAXPR, settle } from "./fakes";

interface Case {
  name: string;
  stored: Record<string, unknown>;
  sent: RunBody | null;
}
const FIXTURE = JSON.parse(readFileSync(new URL("../fixtures/early-run.json", import.meta.url), "utf8")) as {
  bare_transforms: string[];
  cases: Case[];
};

type SocketModule = typeof import("../../src/connection/socket");
let socket: SocketModule;

beforeAll(async () => {
  // connection/socket.ts makes the page's connection when imported: for the page's address
  vi.stubGlobal("location", { protocol: "http:", host: "test" });
  vi.stubGlobal("WebSocket", FakeSocket); // a reconnect makes a fake
  socket = await import("../../src/connection/socket");
});

/** The page's own run of a stored link (what app/start.ts sends), and its problems. */
function pageRun(stored: unknown): { request: RunBody; problems: StepProblem[] } {
  const problems: StepProblem[] = [];
  return { request: toRequest(fromRequest(stored, DEFAULT_STATE), problems), problems };
}

describe("the run the server sends early", () => {
  const known = FIXTURE.cases.filter((c) => c.sent !== null);

  it("has cases the server sends early and cases it leaves to the page", () => {
    expect(known.length).toBeGreaterThanOrEqual(5);
    expect(FIXTURE.cases.length - known.length).toBeGreaterThanOrEqual(5);
  });

  it.each(known.map((c) => [c.name, c] as const))("is the page's own run: %s", (_name, c) => {
    const { request, problems } = pageRun(c.stored);
    expect(problems).toEqual([]);
    expect(socket.canonical(request)).toBe(socket.canonical(c.sent));
  });

  it("knows every bare step the page sends back as it came", () => {
    expect(FIXTURE.bare_transforms.length).toBeGreaterThan(0);
    for (const name of FIXTURE.bare_transforms) {
      expect(TransformName.options).toContain(name);
      const { request, problems } = pageRun({ code: "x", transforms: [{ name }], compare: [[{ name }]] });
      expect(problems).toEqual([]);
      expect(request.transforms).toEqual([{ name }]);
      expect(request.compare).toEqual([[{ name }]]);
    }
  });

  it("compares requests whatever their keys' order, and by every value", () => {
    const a = { code: "x", config: { b: true, a: "s" }, transforms: [{ name: "jit" }] };
    const b = { transforms: [{ name: "jit" }], config: { a: "s", b: true }, code: "x" };
    expect(socket.canonical(a)).toBe(socket.canonical(b));
    expect(socket.canonical(a)).not.toBe(socket.canonical({ ...b, config: { a: "s", b: false } }));
  });
});

const REQUEST = { code: "def f(x):\n    return x\n", entry: "f", args: "(1.0,)", transforms: [{ name: "jit" }] } as RunBody;

describe("adopting the first script's socket", () => {
  const seen: string[] = [];
  beforeEach(async () => {
    vi.resetModules(); // a new page: its own connection
    socket = await import("../../src/connection/socket");
    FakeSocket.made = [];
    seen.length = 0;
    socket.route({
      onEvent: (seq, e) => seen.push(`${seq} ${e.type}`),
      onProblem: (seq, m) => seen.push(`${seq} problem ${m}`),
      onDropped: (seq, why) => seen.push(`${seq} dropped ${why}`),
    });
  });

  /** A socket as the first script leaves it: open, its run sent, `messages` come. */
  function early(messages: unknown[], opened = true) {
    const ws = new FakeSocket("ws://test/api/v1/ws");
    if (opened) {
      ws.readyState = 1;
      ws.send(JSON.stringify({ type: "run", seq: 1, payload: REQUEST }));
    }
    const holder = {
      __jaxplayEarly: {
        socket: ws,
        request: REQUEST,
        seq: 1,
        sent: opened,
        messages: messages.map((m) => ({ data: JSON.stringify(m) })),
      } as unknown,
    };
    return { ws, holder };
  }

  it("replays what came before, holds it for the page's run, and continues the seq", async () => {
    const { ws, holder } = early([
      { type: "hello", seq: -1, payload: { version: 1 } },
      { type: "event", seq: 1, payload: ACCEPTED },
    ]);
    expect(socket.adoptEarly(holder)).not.toBeNull();
    expect(holder.__jaxplayEarly).toBeUndefined();
    socket.conn.keep(); // no second socket: the adopted one is the connection's
    ws.event(1, JAXPR);
    expect(seen).toEqual([]); // held for the page
    // the page's run of the same request, its keys in another order
    const { transforms, code, args, entry } = REQUEST;
    const taken = socket.takeEarly({ transforms, args, entry, code } as RunBody);
    expect(taken).not.toBeNull();
    expect(await taken).toBe(1);
    socket.release();
    expect(seen).toEqual(["1 accepted", "1 jaxpr"]);
    ws.event(1, DONE);
    expect(seen).toEqual(["1 accepted", "1 jaxpr", "1 done"]);
    expect(FakeSocket.made).toEqual([ws]);
    expect(ws.runs()).toEqual([1]); // the first script's frame: the page sent none
    // the page's next run follows on the same socket with the next seq
    expect(await socket.conn.run({ ...REQUEST, args: "(2.0,)" })).toBe(2);
    expect(ws.runs()).toEqual([1, 2]);
    ws.close(1000, "test"); // leave the module's connection closed for the next test
  });

  it("drops the early run for another request: its events with it, the page's sent after it", async () => {
    const { ws, holder } = early([{ type: "hello", seq: -1, payload: { version: 1 } }]);
    expect(socket.adoptEarly(holder)).not.toBeNull();
    ws.event(1, ACCEPTED);
    expect(socket.takeEarly({ ...REQUEST, args: "(3.0,)" })).toBeNull();
    const seq = socket.conn.run({ ...REQUEST, args: "(3.0,)" });
    ws.event(1, DONE); // the early run ends: the page's leaves
    expect(await seq).toBe(2);
    expect(ws.runs()).toEqual([1, 2]);
    ws.event(2, ACCEPTED);
    expect(seen).toEqual(["2 accepted"]);
    ws.close(1000, "test");
  });

  it("adopts a socket still connecting: the run is the page's once it leaves", async () => {
    const { ws, holder } = early([], false);
    let left = false;
    const leaving = socket.adoptEarly(holder);
    expect(leaving).not.toBeNull();
    void leaving?.then(() => (left = true)); // the entry loads the page after this
    await settle();
    expect(left).toBe(false);
    const taken = socket.takeEarly(REQUEST);
    expect(taken).not.toBeNull();
    // the first script's listener sends the run when the socket opens (before ours)
    ws.addEventListener("open", () => undefined);
    ws.send(JSON.stringify({ type: "run", seq: 1, payload: REQUEST }));
    ws.opened();
    expect(await taken).toBe(1);
    await settle();
    expect(left).toBe(true);
    ws.greet();
    socket.release();
    ws.event(1, JAXPR);
    expect(seen).toEqual(["1 jaxpr"]);
    ws.close(1000, "test");
    await settle();
  });

  it("adopts nothing from a socket closed already, or from no script at all", () => {
    const { ws, holder } = early([{ type: "hello", seq: -1, payload: { version: 1 } }]);
    ws.readyState = 3;
    expect(socket.adoptEarly(holder)).toBeNull();
    expect(socket.adoptEarly({})).toBeNull();
    expect(socket.adoptEarly({ __jaxplayEarly: { socket: {}, seq: 1 } })).toBeNull();
    expect(socket.takeEarly(REQUEST)).toBeNull();
  });
});
