// The page's one WebSocket (connection.ts), made by the entry (boot.ts) before the rest
// of the page has loaded, so its handshake overlaps the loading. Its events go to the
// handlers main.ts routes them to.
//
// A shared link's run is sent by the entry too, as soon as the socket is open
// (`sendEarly`): the page is still loading then. Its events are held until the page,
// built, starts its own run: the same request adopts the early run (`takeEarly`, then
// `release` once the page has cleared its outputs for it); another request drops it
// (the held events with it) and is sent as usual, replacing it on the wire.
import { Connection, wsUrl, type ConnectionHandlers } from "../connection";
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
  holding = true;
  const sent = conn.run(request);
  early = { request, sent };
  return sent.catch(() => {}); // not reachable: said when the page adopts the run (app/run.ts)
}

/** The early run when it is `request` (its events stay held until `release`); null
 * otherwise (or for null: the page runs nothing first), the early run and its held
 * events dropped. */
export function takeEarly(request: RunBody | null): Promise<number> | null {
  const run = early;
  early = null;
  if (run && request !== null && JSON.stringify(run.request) === JSON.stringify(request)) return run.sent;
  holding = false;
  held.length = 0;
  return null;
}

/** The held events of the adopted run, delivered now; later ones as they come. */
export function release(): void {
  holding = false;
  for (const work of held.splice(0)) work();
}
