// A shared link's results embedded in the page (issue 27): parsed as the run's events.
import { describe, expect, it } from "vitest";
import { parseInitial } from "../../src/connection/initial";
import { ACCEPTED, DONE, JAXPR } from "./fakes";

const request = { code: "def f(x):\n    return x\n", args: "(1.0,)" };

describe("parseInitial", () => {
  it("reads the request and the events, in order", () => {
    const text = JSON.stringify({ snippet_id: "abc", request, events: [{ ...ACCEPTED, cached: true }, JAXPR, DONE] });
    const initial = parseInitial(text);
    expect(initial?.snippetId).toBe("abc");
    expect(initial?.request).toEqual(request);
    expect(initial?.events.map((e) => e.type)).toEqual(["accepted", "jaxpr", "done"]);
    expect(initial?.pending).toEqual([]);
    const timing = parseInitial(JSON.stringify({ request, events: [ACCEPTED, DONE], pending: ["timing", 3] }));
    expect(timing?.pending).toEqual(["timing"]);
  });

  it("reads the escaped form the server writes into HTML", () => {
    const escaped = JSON.stringify({ snippet_id: "abc", request: { ...request, code: "a < b && c > d </script>" }, events: [ACCEPTED, DONE] })
      .replace(/</g, "\\u003c")
      .replace(/>/g, "\\u003e")
      .replace(/&/g, "\\u0026");
    expect(escaped).not.toMatch(/[<>&]/);
    expect((parseInitial(escaped)?.request as { code: string }).code).toBe("a < b && c > d </script>");
  });

  it("is a whole run or nothing", () => {
    expect(parseInitial("not json")).toBeNull();
    expect(parseInitial(JSON.stringify({ request, events: [ACCEPTED, JAXPR] }))).toBeNull(); // no done
    expect(parseInitial(JSON.stringify({ request, events: [JAXPR, DONE] }))).toBeNull(); // no accepted
    expect(parseInitial(JSON.stringify({ events: [ACCEPTED, DONE] }))).toBeNull(); // no request
  });

  it("accepts a run whose code wrote to the event channel (done: tampered)", () => {
    const initial = parseInitial(JSON.stringify({ request, events: [ACCEPTED, JAXPR, { ...DONE, status: "tampered" }] }));
    expect(initial?.events.at(-1)).toMatchObject({ type: "done", status: "tampered" });
  });
});
