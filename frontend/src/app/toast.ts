// A short message under the top bar (a share link, a step rewritten), gone after 8 s.
export class Toast {
  private timer = 0;

  constructor(private readonly el: HTMLElement) {}

  show(...content: (Node | string)[]): void {
    this.el.replaceChildren(...content);
    this.el.hidden = false;
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => (this.el.hidden = true), 8000);
  }
}
