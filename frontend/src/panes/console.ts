// What the code printed, in order, each block marked with when it was printed:
// a plain print runs at trace time, jax.debug.print at run time.
import { clear, h } from "../util/dom";
import type { RunEvent } from "../connection/protocol";
import type { OutputPane } from "./pane";

const WHEN: Record<string, { label: string; cls: string; help: string }> = {
  exec: { label: "module", cls: "when-module", help: "printed while the module ran (import time)" },
  args: { label: "args", cls: "when-module", help: "printed while evaluating args" },
  trace: { label: "trace time", cls: "when-trace", help: "printed while JAX traced f: once per trace, not per call" },
  lower: { label: "compile time", cls: "when-trace", help: "printed while lowering" },
  compile: { label: "compile time", cls: "when-trace", help: "printed while compiling" },
  execute: { label: "run time", cls: "when-run", help: "printed when the compiled function ran" },
  timing: { label: "timing runs", cls: "when-run", help: "printed during the timing loops" },
};

interface Entry {
  stream: "stdout" | "stderr";
  stage: string;
  pipeline: string;
  text: string;
}

export class ConsolePane implements OutputPane {
  readonly consumes = ["stdout", "stderr"] as const;
  private entries: Entry[] = [];
  private list: HTMLElement;
  private note: HTMLElement;
  private compare = false;

  constructor(readonly root: HTMLElement) {
    this.note = h("p", { class: "pane-note" }, "Nothing printed yet.");
    this.list = h("div", { class: "console", role: "log", "aria-live": "polite" });
    root.append(this.note, this.list);
  }

  reset(pipelines: string[]): void {
    this.entries = [];
    this.compare = pipelines.length > 1;
    clear(this.list);
    this.note.hidden = false;
    this.note.textContent = "Nothing printed yet.";
  }

  add(stream: "stdout" | "stderr", stage: string | null | undefined, pipeline: string, text: string): void {
    const entry = { stream, stage: stage ?? "exec", pipeline, text };
    this.entries.push(entry);
    this.note.hidden = true;
    const when = WHEN[entry.stage] ?? { label: entry.stage, cls: "when-module", help: "" };
    const who = this.compare && pipeline !== "main" ? ` · B` : this.compare ? " · A" : "";
    this.list.append(
      h(
        "div",
        { class: `console-entry ${stream} ${when.cls}`, "data-stage": entry.stage },
        h("span", { class: "when", title: when.help }, `${when.label}${who}${stream === "stderr" ? " · stderr" : ""}`),
        h("pre", { tabindex: 0 }, text),
      ),
    );
  }

  show(event: RunEvent, pipeline: string): void {
    if (event.type === "stdout" || event.type === "stderr") this.add(event.type, event.stage, pipeline, event.text);
  }

  end(): void {}

  badge(): string {
    return String(this.entries.length);
  }

  count(): number {
    return this.entries.length;
  }
}
