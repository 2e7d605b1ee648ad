// The run controller against a fake connection: the frame first, then the redraw; a
// run sent with the page painted without a connection; re-runs from the last request.
import { describe, expect, it } from "vitest";
import type { RunConnection } from "../../src/connection";
import type { RunBody } from "../../src/generated/request";
import { RunController, withOutput, type RunView } from "../../src/app/run";
import { installRunShortcut } from "../../src/app/shortcuts";
import { parseEvent, type RunEvent } from "../../src/protocol";
import { ACCEPTED, DONE, JAXPR } from "./fakes";

const REQUEST = { code: "def f(x):\n    return x\n", args: "(1.0,)" } as RunBody;
const ev = (raw: unknown): RunEvent => {
  const p = parseEvent(raw);
  if (!p.ok) throw new Error(p.why);
  return p.event;
};

function setup(fail = false) {
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
  return { runs: new RunController(conn, view), log, sent };
}

describe("RunController", () => {
  it("sends the run before the page redraws", async () => {
    const { runs, log } = setup();
    await runs.send(REQUEST);
    expect(log).toEqual(["sent", "start"]);
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
