// What Errors says of a run out of time (issue 48). The server's reason is written for
// REST: "wall clock 20 s, reached in the compile stage (stages done: exec 0.9 s, …); a
// longer timeout_s may let it finish: this server allows up to 60 s". The stage and how
// far the run got are the page's to say too; `timeout_s` is a field a page user never
// sets: the page's way to more time is its button ("Run again with up to 60 s"), so
// that clause is left out where the button is offered.

/** How the supervisor's reason of a run out of time ends (sandbox/protocol/events.py
 * TIMEOUT_LONGER), and what a server adds after it. */
const LONGER = /; a longer timeout_s may let it finish.*$/s;

/** `reason` as Errors shows it: without the REST clause when the page offers a longer
 * run (`offered`); as it is otherwise (the server said the run had its longest limit,
 * or the page has no longer limit to offer). */
export function timeoutText(reason: string, offered: boolean): string {
  if (!offered || !LONGER.test(reason)) return reason;
  return `${reason.replace(LONGER, "")}.`;
}
