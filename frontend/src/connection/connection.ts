// The WebSocket client (SPEC §3): one connection, opened when the page loads (the first
// run pays no handshake) and opened again whenever it closes (the server's idle timeout,
// a restart), after a short backoff.
//
// Replacing a live run: on the wire a new `run` cancels the connection's previous one,
// and a cancelled run retires the tenant's kept process (the next run forks a fresh one:
// its `args` stage ~55 ms instead of < 1 ms). A warm edit's run ends in tens of ms, so
// letting it finish is cheaper than cancelling it: a run asked for while another is
// live is held back up to `replaceGraceMs` for the old run's `done` (whose events the
// page no longer shows), then sent; an old run still going after that (a slow compile,
// a loop) is replaced on the wire, which cancels it. Only the newest held run is sent.
// The Cancel button still cancels at once.
import { parseServerMessage, type RunEvent } from "./protocol";
import type { RunBody } from "../generated/request";

export interface ConnectionHandlers {
  onEvent: (seq: number, event: RunEvent) => void;
  /** a problem with run `seq` (refused: 422, 429, 503…), or with the connection (seq -1) */
  onProblem: (seq: number, message: string, status: number | null, field: string | null) => void;
  /** the connection closed while run `seq` was still live */
  onDropped: (seq: number, why: string) => void;
}

/** What the run controller needs of a connection (app/run.ts; a fake in unit tests). */
export interface RunConnection {
  /** Starts a run; its events go to onEvent with the returned seq. */
  run(request: RunBody): Promise<number>;
  /** Asks the server to cancel the shown run; false when nothing was sent. */
  cancel(): boolean;
}

/** A socket opened before the page loaded, with the run it sent (Connection.adopt). */
export interface EarlySocket {
  socket: WebSocket;
  /** the run's seq */
  seq: number;
  /** whether the run is on the wire yet (else it leaves when the socket opens) */
  sent: () => boolean;
  /** the server's messages that came before the page took the socket over */
  messages: MessageEvent[];
}

/** The WebSocket constructor (a fake in unit tests). */
export type SocketFactory = (url: string) => WebSocket;

export interface ConnectionOptions {
  /** how long a new run waits for the live one's `done` before replacing it */
  replaceGraceMs?: number;
  /** reconnect backoff: first delay and cap */
  reconnectMs?: number;
  reconnectMaxMs?: number;
  socket?: SocketFactory;
}

/** A shared link's or an embed's page: its snippet id (the server's SNIPPET_ID). */
const LINK_PATH = /^\/[se]\/([a-z2-7]{8,52})$/;

/** The socket's URL. A link's page names its link (`?link=ID`): the server then runs
 * that link's code as it came in a process of its own, discarded after the run, never
 * in the one kept for this person's own edits (backend/app/trust/provenance.py, issue 33).
 * The server's early-run script (backend/app/web/early_run.py) makes the same URL. */
export function wsUrl(loc: Pick<Location, "protocol" | "host" | "pathname">): string {
  return `${loc.protocol === "https:" ? "wss:" : "ws:"}//${loc.host}/api/v1/ws${linkQuery(loc)}`;
}

/** `?link=ID` on a shared link's or an embed's page, else "" (the WebSocket's and
 * `POST /api/v1/across`'s: both run the page's code). */
export function linkQuery(loc: Pick<Location, "pathname">): string {
  const link = LINK_PATH.exec(loc.pathname)?.[1];
  return link ? `?link=${link}` : "";
}

const OPEN = 1;

export class Connection implements RunConnection {
  private socket: WebSocket | null = null;
  private opening: Promise<WebSocket> | null = null;
  private nextSeq = 1;
  /** the run whose events are shown; -1 when none */
  current = -1;
  /** the run the server is working on (sent, no `done` or error yet); -1 when none */
  private live = -1;
  private liveEnded: (() => void)[] = [];
  private kept = false;
  private retryMs: number;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly graceMs: number;
  private readonly makeSocket: SocketFactory;
  private adopted: EarlySocket | null = null;
  hello: Record<string, unknown> | null = null;
  /** runs sent on the wire (for tests and the benchmark) */
  sent = 0;

  constructor(
    private readonly url: string,
    private readonly handlers: ConnectionHandlers,
    private readonly options: ConnectionOptions = {},
  ) {
    this.graceMs = options.replaceGraceMs ?? 250;
    this.retryMs = options.reconnectMs ?? 500;
    this.makeSocket = options.socket ?? ((u) => new WebSocket(u));
  }

  /** Opens the connection now and keeps it open (reopened after it closes). */
  keep(): void {
    this.kept = true;
    this.open().catch(() => this.reconnectLater());
  }

  private reconnectLater(): void {
    if (!this.kept || this.retryTimer !== null) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.options.reconnectMaxMs ?? 30_000);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.open().catch(() => this.reconnectLater());
    }, delay);
  }

  private endLive(seq: number): void {
    if (seq !== this.live) return;
    this.live = -1;
    const waiting = this.liveEnded;
    this.liveEnded = [];
    for (const w of waiting) w();
  }

  private open(): Promise<WebSocket> {
    if (this.socket && this.socket.readyState === OPEN) return Promise.resolve(this.socket);
    if (this.opening) return this.opening;
    this.opening = this.attach(this.makeSocket(this.url));
    return this.opening;
  }

  /** Takes over a socket the page's first script opened (backend/app/web/early_run.py), with
   * the run it sent as `seq` (sent, or sent once it opens) and the messages that came
   * before now, replayed here as if they came now. The run is current and live; the
   * next run's seq follows it. Returns the run's seq once it is on the wire (rejected
   * when the socket closes first); null, nothing taken over, for a socket already
   * closing or closed (the page then connects and runs as usual). */
  adopt(early: EarlySocket): Promise<number> | null {
    const ws = early.socket;
    if (ws.readyState > OPEN || this.socket || this.opening) return null;
    const { seq } = early;
    this.adopted = early;
    this.nextSeq = Math.max(this.nextSeq, seq + 1);
    this.current = seq;
    this.live = seq;
    this.sent++;
    const sent = early.sent()
      ? Promise.resolve(seq)
      : new Promise<number>((resolve, reject) => {
          // after the first script's own listener, which sends the run
          ws.addEventListener("open", () => resolve(seq));
          ws.addEventListener("close", (e) => reject(new Error(`could not connect to the server (${e.code || "no answer"})`)));
        });
    sent.catch(() => {}); // said by whoever awaits it
    this.opening = this.attach(ws);
    this.opening.catch(() => {}); // keep() reconnects
    for (const m of early.messages.splice(0)) ws.onmessage?.(m);
    return sent;
  }

  /** Handles `ws`'s messages and its closing; resolves with it once it said hello. */
  private attach(ws: WebSocket): Promise<WebSocket> {
    return new Promise<WebSocket>((resolve, reject) => {
      let greeted = false;
      ws.onmessage = (m) => {
        const msg = parseServerMessage(typeof m.data === "string" ? m.data : "");
        if (msg.type === "hello") {
          this.hello = msg.payload;
          if (!greeted) {
            greeted = true;
            this.socket = ws;
            this.opening = null;
            this.retryMs = this.options.reconnectMs ?? 500;
            resolve(ws);
          }
        } else if (msg.type === "event") {
          if (msg.event.type === "done") this.endLive(msg.seq);
          if (msg.seq !== this.current) return; // a superseded run
          if (msg.event.type === "done") this.current = -1;
          this.handlers.onEvent(msg.seq, msg.event);
        } else if (msg.type === "error") {
          this.endLive(msg.seq);
          if (msg.seq !== -1 && msg.seq !== this.current) return;
          if (msg.seq === this.current) this.current = -1;
          this.handlers.onProblem(msg.seq, msg.message, msg.status, msg.field);
        } else if (msg.type === "invalid") {
          console.warn("jaxplay: a message from the server did not validate:", msg.why);
        }
      };
      ws.onclose = (e) => {
        if (this.socket === ws) this.socket = null;
        this.endLive(this.live);
        if (!greeted) {
          this.opening = null;
          // an adopted run sent on a socket that closed before its hello
          if (ws === this.adopted?.socket && this.adopted.sent() && this.current === this.adopted.seq) {
            this.current = -1;
            this.handlers.onDropped(this.adopted.seq, e.reason || `connection closed (${e.code})`);
          }
          reject(new Error(`could not connect to the server (${e.code || "no answer"})`));
          return;
        }
        if (this.current !== -1) {
          const seq = this.current;
          this.current = -1;
          this.handlers.onDropped(seq, e.reason || `connection closed (${e.code})`);
        }
        this.reconnectLater();
      };
      ws.onerror = () => {
        // onclose follows and says what to do
      };
    });
  }

  /** Waits for the live run's `done` (or error, or the socket closing), at most `ms`. */
  private liveEndsWithin(ms: number): Promise<void> {
    if (this.live === -1) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.liveEnded.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  run(request: RunBody): Promise<number> {
    const seq = this.nextSeq++;
    this.current = seq;
    // the common case: connected, nothing live: sent now, before the page redraws
    if (this.live === -1 && this.socket && this.socket.readyState === OPEN) {
      this.send(this.socket, seq, request);
      return Promise.resolve(seq);
    }
    return this.runLater(seq, request);
  }

  private async runLater(seq: number, request: RunBody): Promise<number> {
    // the old run's events are no longer shown from here on; it may finish in peace
    if (this.live !== -1) await this.liveEndsWithin(this.graceMs);
    if (this.current !== seq) return seq; // superseded while waiting
    let ws: WebSocket;
    try {
      ws = await this.open();
    } catch (e) {
      if (this.current === seq) this.current = -1;
      throw e;
    }
    if (this.current !== seq) return seq; // superseded while connecting
    this.send(ws, seq, request);
    return seq;
  }

  private send(ws: WebSocket, seq: number, request: RunBody): void {
    ws.send(JSON.stringify({ type: "run", seq, payload: request }));
    this.live = seq;
    this.sent++;
  }

  cancel(): boolean {
    if (this.current === -1) return false;
    if (this.live !== this.current || !this.socket || this.socket.readyState !== OPEN) {
      this.current = -1; // not sent yet (held back, or still connecting): it never will be
      return false;
    }
    this.socket.send(JSON.stringify({ type: "cancel", seq: this.current }));
    return true;
  }
}
