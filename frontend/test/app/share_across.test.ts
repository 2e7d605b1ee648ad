// Share and across-versions against fake fetches (no server, no DOM).
import { describe, expect, it } from "vitest";
import { AcrossController, type AcrossViewLike } from "../../src/app/across-controller";
import { shareRequest } from "../../src/app/share";
import * as rules from "../../src/model/across-versions";
import type { RunBody } from "../../src/generated/request";

const REQUEST = { code: "def f(x):\n    return x\n", args: "(1.0,)" } as RunBody;

function answer(status: number, body: unknown): typeof fetch {
  return (async () => new Response(JSON.stringify(body), { status })) as typeof fetch;
}

describe("shareRequest", () => {
  it("stores the request, sets the page's address to the link and copies it", async () => {
    let path = "";
    let copied = "";
    const shared = await shareRequest(REQUEST, {
      fetch: answer(201, { id: "abc123", url: "/s/abc123" }),
      origin: "http://jaxplay.test",
      setPath: (p) => (path = p),
      copy: async (t) => void (copied = t),
    });
    expect(shared).toEqual({ url: new URL("http://jaxplay.test/s/abc123"), copied: true });
    expect(path).toBe("/s/abc123");
    expect(copied).toBe("http://jaxplay.test/s/abc123");
  });

  it("links to the output on show: the link's fragment names its tab", async () => {
    let path = "";
    let copied = "";
    await shareRequest(REQUEST, {
      fetch: answer(201, { id: "abc123", url: "/s/abc123" }),
      origin: "http://jaxplay.test",
      hash: "#out=autodiff",
      setPath: (p) => (path = p),
      copy: async (t) => void (copied = t),
    });
    expect(path).toBe("/s/abc123#out=autodiff");
    expect(copied).toBe("http://jaxplay.test/s/abc123#out=autodiff");
  });

  it("says why the server refused, and still links without the clipboard", async () => {
    const refused = await shareRequest(REQUEST, { fetch: answer(413, { message: "too big" }), origin: "http://x", setPath: () => {}, copy: async () => {} });
    expect(refused).toEqual({ problem: "Could not share: too big" });
    const noClipboard = await shareRequest(REQUEST, {
      fetch: answer(201, { id: "a", url: "/s/a" }),
      origin: "http://x",
      setPath: () => {},
      copy: async () => {
        throw new Error("denied");
      },
    });
    expect(noClipboard).toMatchObject({ copied: false });
  });
});

class FakeAcrossView implements AcrossViewLike {
  log: string[] = [];
  setVersions(offered: string[], ticked: string[]): void {
    this.log.push(`versions ${offered.join(",")} ticked ${ticked.join(",")}`);
  }
  ticked(): string[] {
    return ["0.4.30", "0.5.0"];
  }
  setStatus(kind: string, text: string): void {
    this.log.push(`${kind}: ${text.split(":")[0]}`);
  }
  clearResult(): void {
    this.log.push("clear");
  }
  show(): void {
    this.log.push("show");
  }
}

describe("AcrossController", () => {
  const versions = [
    { version: "0.4.30", installed: true, default: false },
    { version: "0.5.0", installed: true, default: true },
  ];

  it("loads its view only when turned on, with the versions offered", async () => {
    const view = new FakeAcrossView();
    let loads = 0;
    const modes: boolean[] = [];
    const c = new AcrossController({
      load: async () => (loads++, { view, mod: rules }),
      ticked: () => undefined,
      onMode: (on) => modes.push(on),
      onBusy: () => {},
    });
    c.setVersions(versions);
    expect(loads).toBe(0);
    c.setMode(true);
    await c.load();
    expect(loads).toBe(1);
    expect(modes).toEqual([true]);
    expect(view.log[0]).toMatch(/^versions 0\.4\.30,0\.5\.0/);
  });

  it("says the server's refusal, and is busy only while it waits", async () => {
    const view = new FakeAcrossView();
    const busy: boolean[] = [];
    const c = new AcrossController({
      load: async () => ({ view, mod: rules }),
      ticked: () => undefined,
      onMode: () => {},
      onBusy: (b) => busy.push(b),
      fetch: answer(422, { message: "no such version", field: "versions" }),
    });
    c.setVersions(versions);
    await c.run(REQUEST);
    expect(view.log.at(-1)).toBe("error: The server refused it (422)");
    expect(busy).toEqual([true, false]);
    expect(c.cancel()).toBe(false);
  });
});
