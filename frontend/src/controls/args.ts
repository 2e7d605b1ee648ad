// The args box follows the entry's signature until it is edited by hand: when the
// signature changes (a parameter added, removed, renamed, given a default or an
// annotation), the box is refilled from it, visibly (a flash and a note), and stays
// editable. Typing in it stops the following; "Fill args" from an error starts it again.
// The entry follows the code too: when it names no function of it (the user replaced
// the example with `def loss(...)`), it becomes the function under the cursor, else the
// last one. The note says where each proposed argument came from, and when JAX refuses
// the proposed ones, why (`refused`), in the args box's own note.
import { describeSignature, entrySignature, followedEntry, proposeArgs, signatureKey, type Signature } from "../model/signature";
import type { PlayState } from "../model/state";

export interface EntryFollowing {
  /** the entry's field */
  box: HTMLInputElement;
  /** the editor's cursor (null: none) */
  cursor: () => number | null;
  /** the entry changed (the pipelines' summaries, the mesh follow) */
  changed: () => void;
}

export class ArgsFollower {
  private key: string | null = null;
  private timer = 0;
  private flashTimer = 0;
  /** the note says JAX refused the proposed args (cleared when the next run starts) */
  private refusal = false;
  private entryByHand = false;

  constructor(
    private readonly box: HTMLInputElement,
    private readonly note: HTMLElement,
    private readonly state: () => PlayState,
    private readonly changed: () => void,
    private readonly entry: EntryFollowing | null = null,
  ) {
    // an entry typed by hand is the user's: followed again when a new state is shown
    entry?.box.addEventListener("input", () => (this.entryByHand = true));
    box.addEventListener("input", () => {
      this.state().argsByHand = true;
      this.say("");
      box.removeAttribute("aria-invalid");
    });
  }

  /** A new state was shown (an example, the autosave, a snippet): its args belong to its code. */
  adopt(): void {
    const s = this.state();
    this.key = signatureKey(entrySignature(s.code, s.entry));
    this.entryByHand = false;
    this.say("");
  }

  /** The code or the entry changed: follow, after a pause in typing. */
  soon(): void {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => this.follow(), 400);
  }

  /** Follow now (before a run, so Ctrl+Enter right after typing sends matching args). */
  follow(): void {
    window.clearTimeout(this.timer);
    const s = this.state();
    const to = this.entry && !this.entryByHand ? followedEntry(s.code, s.entry.trim() || "f", this.entry.cursor()) : null;
    if (to !== null && this.entry) {
      s.entry = to;
      this.entry.box.value = to;
      this.entry.changed();
    }
    const sig = entrySignature(s.code, s.entry.trim() || "f");
    const key = signatureKey(sig);
    if (sig === null || key === this.key) return;
    this.key = key;
    if (!s.argsByHand) this.fill(sig);
  }

  /** The signature of the entry as the code has it now, if the page can read it. */
  signature(): Signature | null {
    const s = this.state();
    return entrySignature(s.code, s.entry.trim() || "f");
  }

  /** Fills the box from `sig` and makes it follow again (the one-click fix). */
  fill(sig: Signature): void {
    const s = this.state();
    const proposed = proposeArgs(sig);
    const args = proposed.text;
    s.argsByHand = false;
    this.key = signatureKey(sig);
    this.box.removeAttribute("aria-invalid");
    if (args === s.args) return;
    s.args = args;
    this.box.value = args;
    const from = proposed.sources.map((x) => `${x.name}: ${x.why}`).join("; ");
    this.say(`args proposed from ${describeSignature(sig)}${from ? ` (${from})` : ""}; edit them freely`);
    this.box.classList.remove("flash");
    void this.box.offsetWidth; // restart the animation
    this.box.classList.add("flash");
    window.clearTimeout(this.flashTimer);
    this.flashTimer = window.setTimeout(() => this.box.classList.remove("flash"), 1600);
    this.changed();
  }

  /** JAX refused the args the page proposed (they were not typed by hand): the note says
   * so, with JAX's words, and the box is marked. False when the args are the user's. */
  refused(message: string): boolean {
    const s = this.state();
    if (s.argsByHand) return false;
    this.blame();
    this.refusal = true;
    this.say(`JAX refused the proposed args ${s.args.trim()}: ${message.split("\n")[0]} — write the arguments ${s.entry.trim() || "f"} takes in the args box`);
    return true;
  }

  /** A run starts: a refusal said for the last run is not this one's. */
  runStarts(): void {
    if (!this.refusal) return;
    this.refusal = false;
    this.box.removeAttribute("aria-invalid");
    this.say("");
  }

  /** Marks the box as the cause of an argument-count error. */
  blame(): void {
    this.box.setAttribute("aria-invalid", "true");
  }

  private say(text: string): void {
    this.note.textContent = text;
    this.note.hidden = text === "";
  }
}
