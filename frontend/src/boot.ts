// The page's entry, kept small: it opens the WebSocket at once (the first run pays no
// handshake, and the handshake overlaps loading the page), sends a shared link's run
// as soon as the socket is open (its events wait for the page: app/socket.ts), then
// loads the page itself (main.ts: its chunks are preloaded by the HTML, vite.config.ts).
import "./style.css";
import { conn, sendEarly } from "./app/socket";
import { INITIAL_ID } from "./app/initial";
import { DEFAULT_STATE } from "./examples";
import { embeddedSnippet, fromRequest, toRequest } from "./state";
import type { StepProblem } from "./transforms";

conn.keep();
// a link whose results came with the page is painted, not run (app/start.ts)
const snippet = document.getElementById(INITIAL_ID) ? null : embeddedSnippet(document);
if (snippet) {
  const problems: StepProblem[] = [];
  const request = toRequest(fromRequest(snippet, DEFAULT_STATE), problems);
  if (problems.length === 0) sendEarly(request);
}
void import("./main");
