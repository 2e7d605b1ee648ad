// The output tabs: which one is shown. Outputs first: a run shows the first output it
// produces, or the tab the user picked before when that one has output; never an empty
// Errors tab after a run that went well. TabChoice is that rule alone (unit-tested);
// TabController keeps the tab bar (a keyboard-operable tablist) in step with it.
import { AfterPaint } from "../panes/render";
import { GROUPS, groupOf, OPENS_ITSELF, TABS, type GroupId, type TabId } from "../model/tabtable";

/** The tabs' marks (the dot of a tab that got output, its badge), written once after
 * the next paint however many events asked for them: a run's outputs come in bursts,
 * and a mark written with the jaxpr would lay the tab bar out in the jaxpr's frame.
 * A run's start leaves the dots as they are; its end takes the dots off the tabs that
 * got no output in it (a warm edit's outputs go to the same tabs: the tab bar is not
 * laid out again at its start, nor at all). */
export class TabMarks {
  private pending = new Map<TabId, string | undefined>();
  /** the tabs that got output since the run on show started */
  private got = new Set<TabId>();
  private readonly later: AfterPaint;

  constructor(
    private readonly write: (id: TabId, badge: string | undefined) => void,
    later?: (work: () => void) => void,
  ) {
    this.later = new AfterPaint(() => this.flush(), later);
  }

  /** `id` got output; `badge`: its new badge (undefined: unchanged). */
  mark(id: TabId, badge?: string): void {
    this.got.add(id);
    this.pending.set(id, badge ?? this.pending.get(id));
    this.later.soon();
  }

  /** A run starts: the last run's marks written now, the tabs with output counted anew. */
  runStarts(): void {
    this.flush();
    this.got.clear();
  }

  /** The run ended: its marks written now; of `ids`, the tabs that got no output in it. */
  runEnds(ids: readonly TabId[]): TabId[] {
    this.flush();
    return ids.filter((id) => !this.got.has(id));
  }

  /** Writes the marks asked for (at once: a run starts or ends). */
  flush(): void {
    const pending = this.pending;
    this.pending = new Map();
    for (const [id, badge] of pending) this.write(id, badge);
  }
}

export class TabChoice {
  active: TabId = "jaxpr";
  /** the tab the user picked (never Errors): shown again by the next run */
  picked: TabId | null = null;
  /** the first tab that got output in this run */
  firstOutput: TabId | null = null;

  /** The user picked `id`. */
  pick(id: TabId): TabId {
    this.picked = id === "errors" ? null : id;
    return id;
  }

  /** A run starts: the tab to show now (the picked one when Errors was on show), or null. */
  runStarts(): TabId | null {
    this.firstOutput = null;
    return this.active === "errors" && this.picked !== null ? this.picked : null;
  }

  /** `tab` got its first output: the tab to show now, or null to stay. */
  outputArrived(tab: TabId): TabId | null {
    if (!OPENS_ITSELF.includes(tab) || this.firstOutput !== null) return null;
    this.firstOutput = tab;
    const to = this.picked === null || this.active === "errors" ? (this.picked ?? tab) : null;
    // the tab on show already (the jaxpr's, most runs): nothing to select (a select
    // reads the layout, which would lay the page out again before the jaxpr is painted)
    return to === this.active ? null : to;
  }

  /** The run ended with no errors to show: leave an empty Errors tab for the outputs. */
  runEndedClean(): TabId | null {
    return this.active === "errors" && this.firstOutput !== null ? this.firstOutput : null;
  }
}

/** The tab bar's elements, as app/layout.ts builds them: the tabs and their panels, and
 * the groups (each group's run of tabs, and its button on the phone's group switcher,
 * which CSS shows only on a narrow screen, where one group's tabs are shown at a time). */
export interface TabElements {
  tabs: Record<TabId, HTMLElement>;
  panels: Record<TabId, HTMLElement>;
  groupRuns: Record<GroupId, HTMLElement>;
  groupButtons: Record<GroupId, HTMLElement>;
}

export class TabController {
  readonly choice = new TabChoice();
  private readonly listeners: ((id: TabId) => void)[] = [];
  private readonly marks = new TabMarks((id, badge) => this.write(id, badge));
  /** the tab last shown in each group: its group's button shows it again */
  private readonly lastInGroup = new Map<GroupId, TabId>();

  constructor(private readonly ui: TabElements) {
    for (const t of TABS) {
      const tab = ui.tabs[t.id];
      tab.addEventListener("click", () => this.pick(t.id));
      tab.addEventListener("keydown", (e) => {
        // the tabs on screen (a narrow screen shows one group's), in the table's order
        const shown = TABS.filter((x) => ui.tabs[x.id].offsetParent !== null || x.id === t.id);
        const i = shown.findIndex((x) => x.id === t.id);
        const n = shown.length;
        const to = { ArrowRight: (i + 1) % n, ArrowLeft: (i - 1 + n) % n, Home: 0, End: n - 1 }[e.key];
        if (to === undefined) return;
        e.preventDefault();
        this.pick(shown[to]!.id, true);
      });
    }
    for (const g of GROUPS) {
      ui.groupButtons[g.id].addEventListener("click", () => {
        const fresh = g.tabs.find((id) => ui.tabs[id].classList.contains("fresh"));
        this.pick(this.lastInGroup.get(g.id) ?? fresh ?? g.tabs[0]!);
      });
    }
  }

  get active(): TabId {
    return this.choice.active;
  }

  /** Called after a tab is shown (its pane renders what it was holding back, bands follow). */
  onSelect(listener: (id: TabId) => void): void {
    this.listeners.push(listener);
  }

  pick(id: TabId, focus = false): void {
    this.select(this.choice.pick(id), focus);
  }

  select(id: TabId, focus = false): void {
    this.choice.active = id;
    for (const t of TABS) {
      const on = t.id === id;
      this.ui.tabs[t.id].setAttribute("aria-selected", String(on));
      this.ui.tabs[t.id].tabIndex = on ? 0 : -1;
      this.ui.panels[t.id].hidden = !on;
    }
    const tab = this.ui.tabs[id];
    tab.classList.remove("fresh");
    // its group's run of tabs is the one a narrow screen shows (style.css)
    const group = groupOf(id);
    this.lastInGroup.set(group, id);
    for (const g of GROUPS) {
      const on = g.id === group;
      if (this.ui.groupRuns[g.id].classList.contains("on") !== on) this.ui.groupRuns[g.id].classList.toggle("on", on);
      this.ui.groupButtons[g.id].setAttribute("aria-pressed", String(on));
    }
    this.groupDot(group);
    if (focus) tab.focus();
    for (const l of this.listeners) l(id);
  }

  /** Marks a tab that got output while another is shown; sets its badge (after the
   * next paint: TabMarks). */
  mark(id: TabId, badge?: string): void {
    this.marks.mark(id, badge);
  }

  /** Sets `id`'s badge now, no dot (written only when it changes). */
  badge(id: TabId, badge: string): void {
    const b = this.ui.tabs[id].querySelector(".tab-badge");
    if (b && b.textContent !== badge) b.textContent = badge;
  }

  private write(id: TabId, badge: string | undefined): void {
    const tab = this.ui.tabs[id];
    if (id !== this.active && !tab.classList.contains("fresh")) {
      tab.classList.add("fresh");
      this.groupDot(groupOf(id));
    }
    if (badge !== undefined) this.badge(id, badge);
  }

  /** The group switcher's button carries a dot while a tab of its group has one. */
  private groupDot(group: GroupId): void {
    const tabs = GROUPS.find((g) => g.id === group)!.tabs;
    const fresh = tabs.some((id) => this.ui.tabs[id].classList.contains("fresh"));
    const button = this.ui.groupButtons[group];
    if (button.classList.contains("fresh") !== fresh) button.classList.toggle("fresh", fresh);
  }

  runStarts(): void {
    this.marks.runStarts();
    const to = this.choice.runStarts();
    if (to !== null) this.select(to);
  }

  /** The run on show ended: the dots of the tabs it sent nothing to go. */
  runEnds(): void {
    for (const id of this.marks.runEnds(TABS.map((t) => t.id))) {
      if (this.ui.tabs[id].classList.contains("fresh")) {
        this.ui.tabs[id].classList.remove("fresh");
        this.groupDot(groupOf(id));
      }
    }
  }

  outputArrived(tab: TabId): void {
    const to = this.choice.outputArrived(tab);
    if (to !== null) this.select(to);
  }

  runEndedClean(): void {
    const to = this.choice.runEndedClean();
    if (to !== null) this.select(to);
  }
}
