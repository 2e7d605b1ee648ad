// The run shortcut wherever the focus is: Ctrl+Enter (Cmd+Enter). The editor binds it
// too (with Shift+Enter) and marks the key event handled; a handled event is left
// alone here, so one key press sends one run.
export function installRunShortcut(target: EventTarget, run: () => void): void {
  target.addEventListener("keydown", (event) => {
    const e = event as KeyboardEvent;
    if (e.defaultPrevented || !(e.ctrlKey || e.metaKey) || e.key !== "Enter") return;
    e.preventDefault();
    run();
  });
}
