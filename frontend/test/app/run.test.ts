// The run controller against a fake connection: the frame first, then the redraw; a
// run sent with the page painted without a connection; re-runs from the last request.
import { describe, expect, it } from "vitest";
import type { RunConnection } from "../../src/connection/connection";
import type { RunBody } from "../../src/generated/request";
import { RunController, withOutput, type EarlyRun, type RunView } from "../../src/app/run";
import { installRunShortcut } from "../../src/app/shortcuts";
import { parseEvent, type RunEvent } from "../../src/connection/protocol";
import { ACCEPTED, DONE, JAXPR } from "./fakes";

const REQUEST = { code: "def f(x):\n    return x\n", args: "(1.0,)" } as RunBody;
const ev = (raw: unknown): RunEvent => {
  const p = parseEvent(raw);
  if (!p.ok) throw new Error(p.why);
  return p.event;
};

function setup(fail = false, early: EarlyRun | null = null) {
  const log: string[] = [];
  const sent: RunBody[] = [];
  const conn: RunConnection = {
    run: (r) => {
      log.push("sent");
      sent.push(r);
      return fail ? Promise.reject(new Error("no server")) : Promise.resolve(sent.length);
    },
    cancel: () => (log.push("cancel"), true),
  };
  const view: RunView = {
    start: (_r, keep) => log.push(keep ? "keep" : "start"),
    event: (e) => log.push(e.type),
    unreachable: (m) => log.push(`unreachable ${m}`),
  };
  return { runs: new RunController(conn, view, early), log, sent };
}

describe("RunController", () => {
  it("sends the run before the page redraws", async () => {
    const { runs, log } = setup();
    await runs.send(REQUEST);
    expect(log).toEqual(["sent", "start"]);
  });

  it("adopts the run the entry sent early for the same request, its events after the page cleared", async () => {
    const shared: string[] = [];
    const early: EarlyRun = {
      take: (r) => (shared.push("take"), JSON.stringify(r) === JSON.stringify(REQUEST) ? Promise.resolve(1) : null),
      release: () => void shared.push("release"),
    };
    const { runs, log, sent } = setup(false, early);
    const view = (runs as unknown as { view: RunView }).view;
    const start = view.start.bind(view);
    view.start = (r, keep) => (shared.push("start"), start(r, keep));
    await runs.send(REQUEST);
    expect(shared).toEqual(["take", "start", "release"]);
    expect(sent).toEqual([]); // no second run on the wire
    await runs.send(REQUEST); // later runs go on the wire
    expect(sent).toEqual([REQUEST]);
    expect(log).toEqual(["start", "sent", "start"]);
  });

  it("drops an early run of another request and sends its own", async () => {
    const taken: (RunBody | null)[] = [];
    const { runs, sent } = setup(false, { take: (r) => (taken.push(r), null), release: () => {} });
    const other = { ...REQUEST, args: "(2.0,)" };
    await runs.send(other);
    expect(taken).toEqual([other]);
    expect(sent).toEqual([other]);
    runs.dropEarly(); // nothing left to drop
    expect(taken).toEqual([other]);
  });

  it("paints a run sent with the page without touching the connection", () => {
    const { runs, log } = setup();
    runs.paint(REQUEST, [ev(ACCEPTED), ev(JAXPR), ev(DONE)]);
    expect(log).toEqual(["start", "accepted", "jaxpr", "done"]);
    expect(runs.lastRequest).toBe(REQUEST);
  });

  it("follows a painted run with a live one that keeps the painted outputs", async () => {
    const { runs, log } = setup();
    runs.paint(REQUEST, [ev(ACCEPTED), ev(DONE)]);
    await runs.follow(REQUEST);
    expect(log).toEqual(["start", "accepted", "done", "sent", "keep"]);
  });

  it("re-runs the last request fresh, past the cache", async () => {
    const { runs, sent } = setup();
    runs.paint(REQUEST, [ev(ACCEPTED), ev(DONE)]);
    await runs.fresh();
    expect(sent).toEqual([{ ...REQUEST, cache: false }]);
  });

  it("says when the server cannot be reached", async () => {
    const { runs, log } = setup(true);
    await runs.send(REQUEST);
    expect(log).toEqual(["sent", "start", "unreachable no server"]);
  });

  it("adds an output to a request once", () => {
    expect(withOutput(REQUEST, "asm", ["jaxpr", "hlo"]).outputs).toEqual(["jaxpr", "hlo", "asm"]);
    const asked = { ...REQUEST, outputs: ["jaxpr", "asm"] } as RunBody;
    expect(withOutput(asked, "asm", ["jaxpr"])).toBe(asked);
  });
});

describe("the run shortcut", () => {
  const key = (init: { ctrlKey?: boolean; metaKey?: boolean; key: string }): Event => {
    const e = new Event("keydown", { cancelable: true, bubbles: true });
    return Object.assign(e, { ctrlKey: false, metaKey: false, ...init });
  };

  it("runs once per Ctrl+Enter or Cmd+Enter, and not for a key the editor handled", () => {
    const target = new EventTarget();
    let runs = 0;
    installRunShortcut(target, () => runs++);
    target.dispatchEvent(key({ ctrlKey: true, key: "Enter" }));
    target.dispatchEvent(key({ metaKey: true, key: "Enter" }));
    target.dispatchEvent(key({ key: "Enter" }));
    const handled = key({ ctrlKey: true, key: "Enter" });
    handled.preventDefault(); // the editor's own binding ran the run
    target.dispatchEvent(handled);
    expect(runs).toBe(2);
  });
});
