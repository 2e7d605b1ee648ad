// The tour's controller (issue 53): `/tour`, `/tour/N`, `/tour/<id>` and `/tour#<id>`
// open a step; the "Learn" button in the top bar opens the tour where the reader left
// it. A step loads its code and request into the real editor and pipeline (model/state.ts
// fromRequest, as a shared link loads), opens its tab, marks its lines and runs. Back
// and next keep each step's place: a step left and come back to shows the code as the
// reader left it (until "start this step over"); each step has its own address
// (pushState, so the browser's back button walks the tour too). Closing the tour
// brings back what the page showed before it opened.
import { DEFAULT_STATE } from "../model/examples";
import { lang, onLang, t } from "../i18n";
import { fromRequest, toRequest, type PlayState } from "../model/state";
import { applyCodeEdit, pathFor, stepFromAddress, TOUR, type TourStep } from "./catalogue";
import { markLines } from "./marks";
import { TourPanel } from "./panel";
import { setTouring, type TourDeps } from "./shared";


const LAST = "jaxplay:tour:last";

export class TourController {
  private readonly panel: TourPanel;
  private step: TourStep | null = null;
  /** each step's state as the reader left it */
  private readonly kept = new Map<string, PlayState>();
  /** what the page showed before the tour opened */
  private before: PlayState | null = null;

  constructor(private readonly d: TourDeps) {
    this.panel = new TourPanel({ go: (s) => this.open(s, true), apply: () => this.apply(), reset: () => this.reset(), close: () => this.close() });
    d.ui.topbar.after(this.panel.root);
    onLang(() => {
      if (this.step) this.panel.show(this.step, lang());
    });
  }

  /** Opens the step the reader was last on (the Learn button). */
  openLast(): void {
    this.open(this.lastStep(), true);
  }

  /** Opens the step the address names, if it is the tour's; true when it did. */
  follow(first: boolean): boolean {
    const found = stepFromAddress(location.pathname, location.hash);
    if (found === null) {
      if (this.step) this.close(false);
      return false;
    }
    const name = decodeURIComponent(location.pathname.split("/")[2] ?? location.hash.slice(1));
    if (found === "unknown") this.open(TOUR[0]!, false, t("tour.unknown", { name }));
    else this.open(found, false);
    // the address names the step by its number (a #id or an id link becomes /tour/N)
    if (first && this.step) history.replaceState(history.state, "", pathFor(this.step) + location.hash.replace(/^#[a-z][a-z0-9-]*$/, ""));
    return true;
  }

  /** Shows `step`: its kept state or its own, its tab and its marked lines, and runs. */
  open(step: TourStep, push: boolean, note = ""): void {
    const { store } = this.d;
    if (this.step) this.kept.set(this.step.id, structuredClone(store.state));
    else this.before = structuredClone(store.state);
    this.step = step;
    setTouring(true);
    const state = this.kept.get(step.id) ?? this.stateOf(step);
    store.show({ ...state, backend: store.state.backend });
    this.d.pickTab(step.tab);
    markLines(this.d.editor(), step.marks);
    this.panel.show(step, lang(), note);
    document.body.classList.add("touring");
    try {
      this.d.storage?.setItem(LAST, step.id);
    } catch {
      // not kept: Learn opens the first step next time
    }
    if (push) history.pushState(history.state, "", pathFor(step));
    this.d.run();
  }

  /** The step's own state: its request, as a shared link's is loaded. */
  private stateOf(step: TourStep): PlayState {
    return fromRequest(step.request, DEFAULT_STATE);
  }

  /** Makes the step's try edit in the editor's code and its request, and runs. */
  apply(): void {
    const step = this.step;
    if (!step) return;
    const { store } = this.d;
    const edited = applyCodeEdit(this.d.editor().state.doc.toString(), step);
    if ("missing" in edited) {
      this.panel.say(t("tour.edited", { text: edited.missing.trim().split("\n")[0] ?? "" }));
      return;
    }
    const request = { ...toRequest(store.state), ...step.edit.request, code: edited.code };
    store.show({ ...fromRequest(request, DEFAULT_STATE), backend: store.state.backend });
    markLines(this.d.editor(), step.marks);
    this.panel.say("");
    if (step.edit.tab) this.d.pickTab(step.edit.tab);
    this.d.run();
  }

  /** The step's own code and request again. */
  reset(): void {
    const step = this.step;
    if (!step) return;
    this.kept.delete(step.id);
    this.d.store.show({ ...this.stateOf(step), backend: this.d.store.state.backend });
    markLines(this.d.editor(), step.marks);
    this.panel.show(step, lang());
    this.d.pickTab(step.tab);
    this.d.run();
  }

  /** Leaves the tour: the page as it was before it opened (its address `/`). */
  close(push = true): void {
    if (!this.step) return;
    this.kept.set(this.step.id, structuredClone(this.d.store.state));
    this.step = null;
    setTouring(false);
    this.panel.hide();
    document.body.classList.remove("touring");
    markLines(this.d.editor(), []);
    if (this.before) this.d.store.show({ ...this.before, backend: this.d.store.state.backend });
    this.before = null;
    if (push) history.pushState(history.state, "", "/");
  }

  private lastStep(): TourStep {
    let id: string | null = null;
    try {
      id = this.d.storage?.getItem(LAST) ?? null;
    } catch {
      // the first step
    }
    return TOUR.find((s) => s.id === id) ?? TOUR[0]!;
  }
}
