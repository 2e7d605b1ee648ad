// The page's entry, kept small: it opens the WebSocket at once (the first run pays no
// handshake, and the handshake overlaps loading the page), sends a shared link's run
// as soon as the socket is open (its events wait for the page: connection/socket.ts), then
// loads the page itself (main.ts and its chunks, fetched then: vite.config.ts).
// A new link's page has usually done both before this module even loaded: the
// server's first script in the page (backend/app/web/early_run.py) opened the socket and
// sent the run; the entry adopts them (`adoptEarly`) and sends nothing.
// A shared link's code (and, when confirmed, its jaxpr) is on screen before any of
// this: the server renders it in the HTML (#jaxplay-static, backend/app/web/page.py), and
// main.ts removes that in the task that builds the page.
import "./style.css";
import { adoptEarly, conn, sendEarly } from "./connection/socket";
import { INITIAL_ID } from "./connection/initial";
import { DEFAULT_STATE } from "./model/examples";
import { embeddedSnippet, fromRequest, toRequest } from "./model/state";
import type { StepProblem } from "./model/transforms";

const adopted = adoptEarly();
conn.keep();
// a link whose results came with the page is painted, not run (app/start.ts)
const snippet = adopted || document.getElementById(INITIAL_ID) ? null : embeddedSnippet(document);
let sent: Promise<unknown> = adopted ?? Promise.resolve();
if (snippet) {
  const problems: StepProblem[] = [];
  const request = toRequest(fromRequest(snippet, DEFAULT_STATE), problems);
  if (problems.length === 0) sent = sendEarly(request);
}
// The run leaves first: building the page is one long task, and the socket's hello
// (which the run waits for) would wait behind it, and so would fetching its chunks;
// an adopted run not yet sent leaves in the socket's `open` event, which would wait too.
// Never longer than EARLY_WAIT_MS: a slow socket does not hold the page back.
const EARLY_WAIT_MS = 300;
void Promise.race([sent, new Promise((r) => setTimeout(r, EARLY_WAIT_MS))]).then(() => import("./main"));
