// The tour's entry on the page (issue 53): the Learn button, and a `/tour` address
// opened. Only this is in the page's first chunk; the catalogue, the panel and the
// controller (tour/tour.ts, with both languages' text of every step) are a chunk of
// their own, loaded when the tour first opens: a shared link's visitor does not pay
// for them.
import { h } from "../util/dom";
import { onLang, t } from "../i18n";
import type { TourController } from "./tour";
import type { TourDeps } from "./shared";

/** The address is the tour's (`/tour`, `/tour/…`). */
export function isTourPath(path: string): boolean {
  return /^\/tour(?:\/|$)/.test(path);
}

/** The Learn button, and the tour opened on a `/tour` address (and on the browser's
 * back and forward into or out of one). */
export function installTour(d: TourDeps): void {
  let controller: Promise<TourController> | null = null;
  const load = (): Promise<TourController> => (controller ??= import("./tour").then((m) => new m.TourController(d)));
  const learn = h("button", { type: "button", id: "learn", "data-testid": "learn", title: t("button.learn.title") }, t("button.learn"));
  learn.addEventListener("click", () => void load().then((c) => c.openLast()));
  // beside the title, as the language switch: not among the run's controls
  const title = d.ui.topbar.querySelector("h1");
  if (title !== null) title.after(learn);
  else d.ui.examples.before(learn);
  onLang(() => {
    learn.textContent = t("button.learn");
    learn.title = t("button.learn.title");
  });
  window.addEventListener("popstate", () => {
    if (controller !== null || isTourPath(location.pathname)) void load().then((c) => c.follow(false));
  });
  if (isTourPath(location.pathname)) void load().then((c) => c.follow(true));
}
