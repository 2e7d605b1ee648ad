// A shared link's results sent with the page: the server embeds, in the HTML of /s/{id}
// and /e/{id} when it may serve the answer,
//   <script type="application/json" id="jaxplay-initial">
//     {"snippet_id": "...", "request": {...}, "events": [accepted, ..., done]}
//   </script>
// (the events exactly the WebSocket run events: `accepted` first with cached: true,
// `done` last). The page paints them before any WebSocket opens, as it paints a run's.
import { parseEvent, type RunEvent } from "../protocol";

export const INITIAL_ID = "jaxplay-initial";

export interface InitialRun {
  snippetId: string | null;
  request: unknown;
  events: RunEvent[];
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
  const { snippet_id, request, events } = data as { snippet_id?: unknown; request?: unknown; events?: unknown };
  if (!Array.isArray(events) || typeof request !== "object" || request === null) return null;
  const parsed: RunEvent[] = [];
  for (const raw of events) {
    const p = parseEvent(raw);
    if (p.ok) parsed.push(p.event);
    else console.warn("jaxplay: an embedded event did not validate:", p.why);
  }
  // a whole run or nothing: accepted first, done last
  if (parsed.length < 2 || parsed[0]!.type !== "accepted" || parsed[parsed.length - 1]!.type !== "done") return null;
  return { snippetId: typeof snippet_id === "string" ? snippet_id : null, request, events: parsed };
}

/** The page's embedded run, if the server sent one. */
export function readInitial(doc: Document): InitialRun | null {
  const el = doc.getElementById(INITIAL_ID);
  return el?.textContent ? parseInitial(el.textContent) : null;
}
