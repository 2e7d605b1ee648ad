// The page's state (what a request is made of) in one holder. `show` puts a whole
// state (a snippet, an example, the autosave) into every control, through the views
// the controllers added, in the order they were added; `changed` saves it to the
// autosave a moment after the last change (never in the embed view, which leaves a
// reader's own autosave alone).
import type { PlayState } from "../model/state";

/** setTimeout and clearTimeout (the window's; fakes in tests). */
export interface Timers {
  set(work: () => void, ms: number): number;
  clear(id: number): void;
}

const WINDOW_TIMERS: Timers = { set: (work, ms) => window.setTimeout(work, ms), clear: (id) => window.clearTimeout(id) };

export const SAVE_AFTER_MS = 300;

export class PlayStore {
  state: PlayState;
  private readonly views: ((state: PlayState) => void)[] = [];
  private saveTimer = 0;

  constructor(
    initial: PlayState,
    /** writes the autosave; null: never (the embed view) */
    private readonly save: ((state: PlayState) => void) | null,
    private readonly timers: Timers = WINDOW_TIMERS,
  ) {
    this.state = structuredClone(initial);
  }

  /** Adds a view: `show` calls it with the new state. */
  onShow(view: (state: PlayState) => void): void {
    this.views.push(view);
  }

  /** Makes a copy of `state` the page's and puts it into every control. */
  show(state: PlayState): void {
    this.state = structuredClone(state);
    for (const view of this.views) view(this.state);
    this.changed();
  }

  /** The state changed: saved a moment after the last change. */
  changed(): void {
    this.timers.clear(this.saveTimer);
    const save = this.save;
    if (save === null) return;
    this.saveTimer = this.timers.set(() => save(this.state), SAVE_AFTER_MS);
  }
}
