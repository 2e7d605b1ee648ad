// A shared link's results sent with the page: the server embeds, in the HTML of /s/{id}
// and /e/{id} when it may serve the answer,
//   <script type="application/json" id="jaxplay-initial">
//     {"snippet_id": "...", "request": {...}, "events": [accepted, ..., done]}
//   </script>
// (the events exactly the WebSocket run events: `accepted` first with cached: true,
// `done` last; `pending`: the outputs asked for that no cache keeps, e.g. timing). The
// page paints them before any WebSocket opens, as it paints a run's, and when some are
// pending runs the request as usual, keeping what it painted (docs/api.md).
import { parseEvent, type RunEvent } from "./protocol";

export const INITIAL_ID = "jaxplay-initial";

export interface InitialRun {
  snippetId: string | null;
  request: unknown;
  events: RunEvent[];
  /** outputs asked for that the embedded answer lacks: a live run brings them */
  pending: string[];
}

/** Parses the embedded element's text; null when it is not a complete run's events. */
export function parseInitial(text: string): InitialRun | null {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof data !== "object" || data === null) return null;
  const { snippet_id, request, events, pending } = data as { snippet_id?: unknown; request?: unknown; events?: unknown; pending?: unknown };
  if (!Array.isArray(events) || typeof request !== "object" || request === null) return null;
  const parsed: RunEvent[] = [];
  for (const raw of events) {
    const p = parseEvent(raw);
    if (p.ok) parsed.push(p.event);
    else console.warn("jaxplay: an embedded event did not validate:", p.why);
  }
  // a whole run or nothing: accepted first, done last
  if (parsed.length < 2 || parsed[0]!.type !== "accepted" || parsed[parsed.length - 1]!.type !== "done") return null;
  const waiting = Array.isArray(pending) ? pending.filter((p): p is string => typeof p === "string") : [];
  return { snippetId: typeof snippet_id === "string" ? snippet_id : null, request, events: parsed, pending: waiting };
}

/** The page's embedded run, if the server sent one. */
export function readInitial(doc: Document): InitialRun | null {
  const el = doc.getElementById(INITIAL_ID);
  return el?.textContent ? parseInitial(el.textContent) : null;
}
