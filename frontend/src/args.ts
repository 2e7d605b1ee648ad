// The args box follows the entry's signature until it is edited by hand: when the
// signature changes (a parameter added, removed, renamed, given a default or an
// annotation), the box is refilled from it, visibly (a flash and a note), and stays
// editable. Typing in it stops the following; "Fill args" from an error starts it again.
import { argsFor, describeSignature, entrySignature, signatureKey, type Signature } from "./signature";
import type { PlayState } from "./state";

export class ArgsFollower {
  private key: string | null = null;
  private timer = 0;
  private flashTimer = 0;

  constructor(
    private readonly box: HTMLInputElement,
    private readonly note: HTMLElement,
    private readonly state: () => PlayState,
    private readonly changed: () => void,
  ) {
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
    const args = argsFor(sig);
    s.argsByHand = false;
    this.key = signatureKey(sig);
    this.box.removeAttribute("aria-invalid");
    if (args === s.args) return;
    s.args = args;
    this.box.value = args;
    this.say(`args filled from ${describeSignature(sig)}; edit them freely`);
    this.box.classList.remove("flash");
    void this.box.offsetWidth; // restart the animation
    this.box.classList.add("flash");
    window.clearTimeout(this.flashTimer);
    this.flashTimer = window.setTimeout(() => this.box.classList.remove("flash"), 1600);
    this.changed();
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
