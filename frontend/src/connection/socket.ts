// The page's one WebSocket (connection/connection.ts), made by the entry (boot.ts) before the rest
// of the page has loaded, so its handshake overlaps the loading. Its events go to the
// handlers main.ts routes them to.
//
// A shared link's run is sent by the entry too, as soon as the socket is open
// (`sendEarly`): the page is still loading then. Its events are held until the page,
// built, starts its own run: the same request adopts the early run (`takeEarly`, then
// `release` once the page has cleared its outputs for it); another request drops it
// (the held events with it) and is sent as usual, replacing it on the wire.
//
// A new link's page usually sent its run before the entry even loaded: the server put
// a small script first in the page (backend/app/web/early_run.py) that opened the socket
// and sent the run the page would send (window.__jaxplayEarly). The entry adopts that
// socket and run instead (`adoptEarly`): the messages it got replayed, the run held
// and taken by the page's first run as one the entry sent.
import { Connection, wsUrl, type ConnectionHandlers, type EarlySocket } from "./connection";
import type { RunBody } from "../generated/request";

const routed: ConnectionHandlers = { onEvent: () => {}, onProblem: () => {}, onDropped: () => {} };
let early: { request: RunBody; sent: Promise<number> } | null = null;
let holding = false;
const held: (() => void)[] = [];
const deliver = (work: () => void): void => void (holding ? held.push(work) : work());

export const conn = new Connection(wsUrl(location), {
  onEvent: (seq, event) => deliver(() => routed.onEvent(seq, event)),
  onProblem: (seq, message, status, field) => deliver(() => routed.onProblem(seq, message, status, field)),
  onDropped: (seq, why) => deliver(() => routed.onDropped(seq, why)),
});

/** Routes the connection's events and problems to `handlers`. */
export function route(handlers: ConnectionHandlers): void {
  Object.assign(routed, handlers);
}

/** Sends `request` before the page is built; its events are held for the page.
 * Resolves once it is on the wire (or could not be sent). */
export function sendEarly(request: RunBody): Promise<unknown> {
  return holdEarly(request, () => conn.run(request)) ?? Promise.resolve();
}

/** Holds `request`'s run for the page's first run: its events are held from before
 * `send` (an adopted socket replays the ones it got), `send` puts it on the wire (its
 * seq) or finds it cannot (null: nothing held). Resolves once it is on the wire (or
 * could not be sent: said when the page adopts the run, app/run.ts). */
function holdEarly(request: RunBody, send: () => Promise<number> | null): Promise<unknown> | null {
  holding = true;
  const sent = send();
  if (sent === null) {
    dropHeld();
    return null;
  }
  early = { request, sent };
  return sent.catch(() => {});
}

function dropHeld(): void {
  holding = false;
  held.length = 0;
}

/** What the page's first script left (backend/app/web/early_run.py EARLY_SCRIPT). */
interface EarlyGlobal {
  socket: WebSocket;
  request: RunBody;
  seq: number;
  sent: boolean;
  messages: MessageEvent[];
}

function earlyGlobal(value: unknown): EarlyGlobal | null {
  if (typeof value !== "object" || value === null) return null;
  const e = value as Partial<EarlyGlobal>;
  if (typeof e.socket?.send !== "function" || typeof e.socket.readyState !== "number") return null;
  if (typeof e.seq !== "number" || !Array.isArray(e.messages) || typeof e.request !== "object" || e.request === null) return null;
  return e as EarlyGlobal;
}

/** Adopts the socket and run the page's first script left in `holder.__jaxplayEarly`
 * (the connection takes the socket over; the run is held for the page as `sendEarly`'s
 * is). Resolves once the run is on the wire (or could not be sent), as `sendEarly`;
 * null when there is none, or its socket closed already. Before `conn.keep()`. */
export function adoptEarly(holder: { __jaxplayEarly?: unknown } = window as never): Promise<unknown> | null {
  const found = earlyGlobal(holder.__jaxplayEarly);
  delete holder.__jaxplayEarly;
  if (found === null) return null;
  const socket: EarlySocket = { socket: found.socket, seq: found.seq, sent: () => found.sent === true, messages: found.messages };
  return holdEarly(found.request, () => conn.adopt(socket));
}

/** JSON with every object's keys sorted: two requests that differ only in key order
 * are the same run. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === "object" && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** The early run when it is `request` (its events stay held until `release`); null
 * otherwise (or for null: the page runs nothing first), the early run and its held
 * events dropped. */
export function takeEarly(request: RunBody | null): Promise<number> | null {
  const run = early;
  early = null;
  if (run && request !== null && canonical(run.request) === canonical(request)) return run.sent;
  dropHeld();
  return null;
}

/** The held events of the adopted run, delivered now; later ones as they come. */
export function release(): void {
  holding = false;
  for (const work of held.splice(0)) work();
}
