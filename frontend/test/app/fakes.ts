// Fakes for the controllers' unit tests (vitest runs in Node: no DOM).
import type { OutputPane } from "../../src/panes/pane";
import type { EventType, RunEvent } from "../../src/connection/protocol";

/** A pane that records what it was asked to do. */
export class FakePane implements OutputPane {
  readonly log: string[] = [];
  constructor(readonly consumes: readonly EventType[]) {}
  reset(pipelines: string[]): void {
    this.log.push(`reset ${pipelines.join(",")}`);
  }
  show(event: RunEvent, pipeline: string): void {
    this.log.push(`show ${event.type} ${pipeline}`);
  }
  end(): void {
    this.log.push("end");
  }
}

/** A WebSocket the test drives: it records what the page sends, and receives on cue. */
export class FakeSocket {
  static made: FakeSocket[] = [];
  readyState = 0;
  sent: { type: string; seq: number; payload?: unknown }[] = [];
  onmessage: ((m: { data: string }) => void) | null = null;
  onclose: ((e: { code: number; reason: string }) => void) | null = null;
  onerror: (() => void) | null = null;
  listeners: { type: string; fn: (e: { code?: number }) => void }[] = [];
  constructor(readonly url: string) {
    FakeSocket.made.push(this);
  }
  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  addEventListener(type: string, fn: (e: { code?: number }) => void): void {
    this.listeners.push({ type, fn });
  }
  private fire(type: string, e: { code?: number } = {}): void {
    for (const l of this.listeners.filter((l) => l.type === type)) l.fn(e);
  }
  /** the socket opens (its `open` listeners run); the server's hello is `greet` */
  opened(): void {
    this.readyState = 1;
    this.fire("open");
  }
  /** the server greets: the connection is open */
  greet(): void {
    this.readyState = 1;
    this.receive({ type: "hello", seq: -1, payload: { version: 1 } });
  }
  receive(message: unknown): void {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
  event(seq: number, payload: unknown): void {
    this.receive({ type: "event", seq, payload });
  }
  close(code = 1001, reason = "idle"): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
    this.fire("close", { code });
  }
  runs(): number[] {
    return this.sent.filter((m) => m.type === "run").map((m) => m.seq);
  }
}

export const DONE = { type: "done", status: "ok", ms: 12, reason: "" };
export const ACCEPTED = {
  type: "accepted",
  run_id: "r1",
  pipeline: "main",
  worker: { backend: "cpu", platform: "cpu", device_kind: "cpu", devices: 1, jax_version: "0.10.2", jaxlib_version: "0.10.2" },
};
export const JAXPR = { type: "jaxpr", text: "{ lambda ; a:f32[]. let  in (a,) }", pipeline: "main" };

/** Lets pending promise callbacks run. */
export const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 0));
