// The WebSocket client (SPEC §3): one connection, opened when first needed and again
// after the server closes it (idle timeout). A new run cancels the previous one on
// the server; here every event of a run that is no longer current is dropped.
import { parseServerMessage, type RunEvent } from "./protocol";
import type { RunBody } from "./generated/request";

export interface ConnectionHandlers {
  onEvent: (seq: number, event: RunEvent) => void;
  /** a problem with run `seq` (refused: 422, 429, 503…), or with the connection (seq -1) */
  onProblem: (seq: number, message: string, status: number | null, field: string | null) => void;
  /** the connection closed while run `seq` was still live */
  onDropped: (seq: number, why: string) => void;
}

export function wsUrl(loc: Location): string {
  return `${loc.protocol === "https:" ? "wss:" : "ws:"}//${loc.host}/api/v1/ws`;
}

export class Connection {
  private socket: WebSocket | null = null;
  private opening: Promise<WebSocket> | null = null;
  private nextSeq = 1;
  /** the run whose events are shown; -1 when none is live */
  current = -1;
  hello: Record<string, unknown> | null = null;

  constructor(
    private readonly url: string,
    private readonly handlers: ConnectionHandlers,
  ) {}

  private open(): Promise<WebSocket> {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) return Promise.resolve(this.socket);
    if (this.opening) return this.opening;
    this.opening = new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(this.url);
      let greeted = false;
      ws.onmessage = (m) => {
        const msg = parseServerMessage(typeof m.data === "string" ? m.data : "");
        if (msg.type === "hello") {
          this.hello = msg.payload;
          if (!greeted) {
            greeted = true;
            this.socket = ws;
            this.opening = null;
            resolve(ws);
          }
        } else if (msg.type === "event") {
          if (msg.seq !== this.current) return; // a superseded run
          if (msg.event.type === "done") this.current = -1;
          this.handlers.onEvent(msg.seq, msg.event);
        } else if (msg.type === "error") {
          if (msg.seq !== -1 && msg.seq !== this.current) return;
          if (msg.seq === this.current) this.current = -1;
          this.handlers.onProblem(msg.seq, msg.message, msg.status, msg.field);
        } else if (msg.type === "invalid") {
          console.warn("jaxplay: a message from the server did not validate:", msg.why);
        }
      };
      ws.onclose = (e) => {
        if (this.socket === ws) this.socket = null;
        if (!greeted) {
          this.opening = null;
          reject(new Error(`could not connect to the server (${e.code || "no answer"})`));
          return;
        }
        if (this.current !== -1) {
          const seq = this.current;
          this.current = -1;
          this.handlers.onDropped(seq, e.reason || `connection closed (${e.code})`);
        }
      };
      ws.onerror = () => {
        // onclose follows and says what to do
      };
    });
    return this.opening;
  }

  /** Starts a run; its events go to onEvent with the returned seq. */
  async run(request: RunBody): Promise<number> {
    const seq = this.nextSeq++;
    this.current = seq;
    let ws: WebSocket;
    try {
      ws = await this.open();
    } catch (e) {
      if (this.current === seq) this.current = -1;
      throw e;
    }
    if (this.current !== seq) return seq; // superseded while connecting
    ws.send(JSON.stringify({ type: "run", seq, payload: request }));
    return seq;
  }

  /** Asks the server to cancel the live run; its `done` (cancelled) still arrives. */
  cancel(): boolean {
    if (this.current === -1) return false;
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) {
      this.current = -1; // still connecting: the run is never sent
      return false;
    }
    this.socket.send(JSON.stringify({ type: "cancel", seq: this.current }));
    return true;
  }
}
