// Rendering off the critical path: the pane on show at once, the others when shown or idle.
import { describe, expect, it } from "vitest";
import { AfterPaint, OWN_TASK_CHARS, PaneScheduler, Throttled, type ScheduledPane } from "../../src/panes/render";
import type { TabId } from "../../src/model/tabtable";
import { parseEvent, type RunEvent } from "../../src/connection/protocol";
import { FakePane, JAXPR } from "./fakes";

const ev = (raw: unknown): RunEvent => {
  const p = parseEvent(raw);
  if (!p.ok) throw new Error(p.why);
  return p.event;
};
const HLO = ev({ type: "hlo", text: "HloModule m\n".repeat(10_000) });

function setup() {
  const jaxpr = new FakePane(["jaxpr"]);
  const hlo = new FakePane(["hlo"]);
  const graph = new FakePane(["jaxpr", "hlo"]);
  const panes: ScheduledPane[] = [
    { tab: "jaxpr", pane: jaxpr },
    { tab: "hlo", pane: hlo },
    { tab: "graph", pane: graph, lazy: true },
  ];
  let active: TabId = "jaxpr";
  const idle: (() => void)[] = [];
  const rendered: TabId[] = [];
  const tasks: (() => void)[] = [];
  const s = new PaneScheduler(panes, () => active, (w) => idle.push(w), (e) => rendered.push(e.tab), (w) => tasks.push(w));
  const feed = (event: RunEvent) => {
    for (const e of s.consumers(event.type)) s.show(e, event, "main");
  };
  return { s, jaxpr, hlo, graph, idle, tasks, rendered, feed, setActive: (t: TabId) => (active = t) };
}

describe("PaneScheduler", () => {
  it("draws a big text on show in a task after the one it came in, and what follows for that pane after it, in order", () => {
    const { s, hlo, jaxpr, tasks, feed, setActive } = setup();
    setActive("hlo");
    s.reset(["main"], {});
    const big = ev({ type: "hlo", text: "x".repeat(OWN_TASK_CHARS + 1) });
    feed(big);
    expect(hlo.log).toEqual(["reset main"]); // not in the message's task
    feed(HLO);
    s.end();
    expect(tasks).toHaveLength(1); // one task drains the pane's queue
    feed(ev(JAXPR)); // another pane, not on show: held as before
    expect(jaxpr.log).toEqual([]);
    expect(s.holds(jaxpr)).toBe(true);
    tasks.shift()!();
    expect(hlo.log).toEqual(["reset main", "show hlo main", "show hlo main", "end"]);
    expect(s.holds(hlo)).toBe(false);
    feed(HLO); // a small one on show: at once, as before
    expect(hlo.log.at(-1)).toBe("show hlo main");
    expect(tasks).toHaveLength(0);
  });

  it("renders the pane on show at once and holds the others back", () => {
    const { s, jaxpr, hlo, graph, feed } = setup();
    s.reset(["main"], {});
    feed(ev(JAXPR));
    feed(HLO);
    expect(jaxpr.log).toEqual(["reset main", "show jaxpr main"]);
    expect(hlo.log).toEqual([]);
    expect(graph.log).toEqual([]);
    expect(s.holds(hlo)).toBe(true);
  });

  it("renders held panes when the page is idle after the run, one per idle slice, never the lazy ones", () => {
    const { s, hlo, graph, idle, feed, rendered } = setup();
    s.reset(["main"], {});
    feed(HLO);
    expect(idle).toHaveLength(0); // while the run goes, the cores are the run's
    s.end();
    expect(idle).toHaveLength(1);
    idle.shift()!();
    expect(hlo.log).toEqual(["reset main", "show hlo main", "end"]);
    expect(rendered).toEqual(["hlo"]);
    expect(graph.log).toEqual([]); // loaded on first use: only when its tab is shown
  });

  it("leaves an idle slice that comes after a new run started to that run's end", () => {
    const { s, hlo, idle, feed } = setup();
    s.reset(["main"], {});
    feed(HLO);
    s.end();
    s.reset(["main"], {}); // the next run, before the page was idle
    idle.shift()!();
    expect(hlo.log).toEqual([]);
    s.end();
    expect(idle).toHaveLength(1);
    idle.shift()!();
    expect(hlo.log).toEqual(["reset main", "end"]);
  });

  it("renders a held pane when its tab is shown, newest run only", () => {
    const { s, graph, feed, setActive } = setup();
    s.reset(["main"], {});
    feed(HLO);
    s.reset(["main", "0"], {});
    feed(ev(JAXPR));
    setActive("graph");
    s.flushTab("graph");
    expect(graph.log).toEqual(["reset main,0", "show jaxpr main"]);
  });
});

describe("AfterPaint", () => {
  it("runs its work once after the paint, however often it was asked for before", () => {
    const later: (() => void)[] = [];
    let runs = 0;
    const links = new AfterPaint(() => runs++, (w) => later.push(w));
    links.soon();
    links.soon(); // the jaxpr and the HLO of one frame: one refresh
    expect(runs).toBe(0); // nothing before the paint
    expect(later).toHaveLength(1);
    later.shift()!();
    expect(runs).toBe(1);
    links.soon(); // asked again after it ran: runs again
    expect(later).toHaveLength(1);
    later.shift()!();
    expect(runs).toBe(2);
  });
});

describe("Throttled", () => {
  function setup(ms = 100) {
    let clock = 0;
    const timers: { at: number; f: () => void; id: number }[] = [];
    let n = 0;
    let runs = 0;
    const t = new Throttled(
      () => runs++,
      ms,
      () => clock,
      {
        set: (f, wait) => {
          timers.push({ at: clock + wait, f, id: ++n });
          return n as unknown as ReturnType<typeof setTimeout>;
        },
        clear: (id) => {
          const i = timers.findIndex((x) => x.id === (id as unknown as number));
          if (i >= 0) timers.splice(i, 1);
        },
      },
    );
    const advance = (to: number) => {
      clock = to;
      for (const x of timers.filter((x) => x.at <= to)) {
        timers.splice(timers.indexOf(x), 1);
        x.f();
      }
    };
    return { t, advance, timers, runs: () => runs };
  }

  it("runs at once when asked now, then at most once per interval however often it is asked", () => {
    const { t, advance, timers, runs } = setup();
    t.now(); // a run's start: drawn at once
    expect(runs()).toBe(1);
    for (const at of [1, 5, 20, 60]) {
      advance(at);
      t.soon(); // stages of a warm run: no draw before 100 ms
    }
    expect(runs()).toBe(1);
    expect(timers).toHaveLength(1);
    advance(100);
    expect(runs()).toBe(2);
    advance(150);
    t.soon();
    advance(199);
    expect(runs()).toBe(2);
    advance(200);
    expect(runs()).toBe(3);
  });

  it("starts the interval again when asked after (a run's start: its chips with the first draw)", () => {
    const { t, advance, timers, runs } = setup();
    t.now();
    advance(1000);
    t.after();
    t.soon(); // a stage: drawn with the same run, not before
    expect(timers).toHaveLength(1);
    advance(1099);
    expect(runs()).toBe(1);
    advance(1100);
    expect(runs()).toBe(2);
  });

  it("waits the delay asked for after, then the interval as before (a run's start drawn late, stale marks)", () => {
    const { t, advance, timers, runs } = setup(100);
    t.now();
    advance(1000);
    t.after(40);
    t.soon(); // the run's accepted and stages: no draw before the start's
    expect(timers).toHaveLength(1);
    advance(1039);
    expect(runs()).toBe(1);
    advance(1040);
    expect(runs()).toBe(2);
    t.soon();
    advance(1139);
    expect(runs()).toBe(2);
    advance(1140);
    expect(runs()).toBe(3);
    t.after(40);
    advance(1150);
    t.now(); // the text came first: at once, nothing left pending
    expect(runs()).toBe(4);
    expect(timers).toHaveLength(0);
  });

  it("drops the run pending when asked now (a run's end drawn at once, once)", () => {
    const { t, advance, timers, runs } = setup();
    t.now();
    advance(10);
    t.soon();
    advance(30);
    t.now();
    expect(runs()).toBe(2);
    expect(timers).toHaveLength(0);
    advance(500);
    expect(runs()).toBe(2);
  });
});
