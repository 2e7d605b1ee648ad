// The run controller: sends a request over a connection (the RunConnection interface:
// the WebSocket client, or a fake in unit tests), paints the events of a run the
// server sent with the page, and re-runs the last request (fresh, past the cache; or
// with one more output). What a run's events do to the page is the view's (main.ts).
import type { RunConnection } from "../connection/connection";
import type { Output, RunBody } from "../generated/request";
import type { RunEvent } from "../connection/protocol";

export interface RunView {
  /** a run starts (sent, or painted from the page): clear the outputs for it, unless
   * `keep` (a live run that follows a painted one: its outputs replace them as they come) */
  start(request: RunBody, keep?: boolean): void;
  /** one event of the run on show */
  event(event: RunEvent): void;
  /** the run could not be sent (the server cannot be reached) */
  unreachable(message: string): void;
}

/** A run sent before the page was built (connection/socket.ts: a shared link's, by the entry). */
export interface EarlyRun {
  /** the early run's seq when it is `request` (adopted), else null (dropped; for null: dropped) */
  take(request: RunBody | null): Promise<number> | null;
  /** the adopted run's events, held until the page cleared its outputs, delivered */
  release(): void;
}

export class RunController {
  /** the request last sent or painted, as it was: re-runs start from it */
  lastRequest: RunBody | null = null;
  /** runs started here (sent or painted) */
  started = 0;

  constructor(
    private readonly conn: RunConnection,
    private readonly view: RunView,
    private early: EarlyRun | null = null,
  ) {}

  /** Sends `request` (or adopts the early run of the same request); its events reach
   * the view through the connection's handler. */
  async send(request: RunBody): Promise<void> {
    this.lastRequest = request;
    this.started++;
    const early = this.early;
    this.early = null;
    // sent first (at once when connected), the page cleared while it travels
    const sent = early?.take(request) ?? this.conn.run(request);
    this.view.start(request);
    early?.release();
    try {
      await sent;
    } catch (e) {
      this.view.unreachable((e as Error).message);
    }
  }

  /** The page's first run was not a run sent (a request that did not parse): an early
   * run is dropped, its events with it. */
  dropEarly(): void {
    this.early?.take(null);
    this.early = null;
  }

  /** Paints a whole run's events (a shared link's results sent with the page) at once. */
  paint(request: RunBody, events: readonly RunEvent[]): void {
    this.lastRequest = request;
    this.started++;
    this.view.start(request);
    for (const e of events) this.view.event(e);
  }

  /** Runs `request` live after it was painted (outputs it lacked are pending), keeping
   * the painted outputs on show until the live run's replace them. */
  async follow(request: RunBody): Promise<void> {
    this.lastRequest = request;
    const sent = this.conn.run(request);
    this.view.start(request, true);
    try {
      await sent;
    } catch (e) {
      this.view.unreachable((e as Error).message);
    }
  }

  /** The last request again, not answered from the cache. */
  fresh(): Promise<void> | null {
    return this.lastRequest ? this.send({ ...this.lastRequest, cache: false }) : null;
  }

  cancel(): boolean {
    return this.conn.cancel();
  }
}

/** `request` asking also for `output` (an opt-in pane's "run again with it"). */
export function withOutput(request: RunBody, output: Output, defaults: readonly Output[]): RunBody {
  const outputs = request.outputs ?? [...defaults];
  return outputs.includes(output) ? request : { ...request, outputs: [...outputs, output] };
}
