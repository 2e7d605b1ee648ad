// Recompiles: why JAX traced and compiled again, per call site (docs/api.md#recompiles):
// each site's calls, hits and misses, each miss with JAX's own explanation and its
// trace, lower and compile milliseconds; a click on a line shows it in the editor,
// which marks every call site's line (editor/editor-recompiles.ts).
import { clear, h } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { LastEventPane } from "./pane";

type Recompiles = EventOf<"recompiles">;
type Site = Recompiles["sites"][number];

function ms(value: number | null | undefined): string {
  return value == null ? "—" : `${value.toFixed(1)} ms`;
}

/** The sums over every site: what the misses cost in all. */
export function totals(sites: readonly Site[]): { misses: number; hits: number; trace: number; lower: number; compile: number } {
  let misses = 0, hits = 0, trace = 0, lower = 0, compile = 0;
  for (const s of sites) {
    misses += s.miss_count;
    hits += s.hits ?? 0;
    trace += s.trace_ms;
    lower += s.lower_ms;
    compile += s.compile_ms;
  }
  return { misses, hits, trace, lower, compile };
}

export class RecompilesPane extends LastEventPane<"recompiles"> {
  readonly consumes = ["recompiles"] as const;

  constructor(
    root: HTMLElement,
    private readonly onLine: (codeLine: number) => void,
  ) {
    super(root);
    this.render();
  }

  /** the misses of the jitted call sites (the tab's badge) */
  badge(): string {
    const n = this.event?.sites.filter((s) => s.jitted).reduce((sum, s) => sum + s.miss_count, 0) ?? 0;
    return n ? String(n) : "";
  }

  private site(s: Site): HTMLElement {
    const at = h("button", { type: "button", class: "linklike", "data-testid": "recompile-line" }, `line ${s.line}`);
    at.addEventListener("click", () => this.onLine(s.line));
    const misses = h(
      "ol",
      { class: "recompile-misses" },
      ...s.misses.map((m) =>
        h(
          "li",
          {},
          h("strong", {}, m.reason),
          h("span", { class: "recompile-ms" }, ` trace ${ms(m.trace_ms)} · lower ${ms(m.lower_ms)} · compile ${ms(m.compile_ms)}${m.from_disk ? " (from the persistent cache)" : ""}`),
          m.explanation ? h("pre", { class: "mono recompile-explanation", tabindex: 0 }, m.explanation) : null,
        ),
      ),
    );
    return h(
      "li",
      { class: "recompile-site", "data-line": String(s.line), "data-function": s.function },
      h("div", { class: "recompile-head" }, at, " ", h("code", {}, s.function), s.caller !== "<module>" ? ` in ${s.caller}` : "", " — ", h("span", { "data-testid": "recompile-summary" }, s.summary)),
      h("p", { class: "recompile-ms" }, `in all: trace ${ms(s.trace_ms)} · lower ${ms(s.lower_ms)} · compile ${ms(s.compile_ms)}`),
      s.silent ? h("p", { class: "pane-note" }, s.silent) : null,
      misses,
    );
  }

  protected render(): void {
    clear(this.root);
    const ev = this.event;
    if (ev === null) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No recompiles output in this run." : "Waiting for the cache misses…"));
      return;
    }
    const jitted = ev.sites.filter((s) => s.jitted);
    const eager = ev.sites.filter((s) => !s.jitted);
    const all = totals(jitted);
    this.root.append(
      h("h3", { class: "pane-heading" }, "Call sites of jitted functions"),
      h("p", { class: "pane-note", "data-testid": "recompile-totals" }, jitted.length ? `${jitted.length} call site${jitted.length === 1 ? "" : "s"}, ${all.misses} compile${all.misses === 1 ? "" : "s"}${ev.counts_calls ? `, ${all.hits} hit${all.hits === 1 ? "" : "s"}` : ""}: trace ${ms(all.trace)} · lower ${ms(all.lower)} · compile ${ms(all.compile)}` : "No jitted function was called in the snippet's top-level code or the entry."),
      h("ul", { class: "recompile-sites" }, ...jitted.map((s) => this.site(s))),
    );
    if (eager.length) {
      const e = totals(eager);
      this.root.append(
        h("details", { class: "recompile-eager" }, h("summary", {}, `Operations outside any jit: ${e.misses} compile${e.misses === 1 ? "" : "s"} at ${eager.length} place${eager.length === 1 ? "" : "s"}, ${ms(e.trace + e.lower + e.compile)}`), h("ul", { class: "recompile-sites" }, ...eager.map((s) => this.site(s)))),
      );
    }
    for (const note of ev.notes ?? []) this.root.append(h("p", { class: "pane-note" }, note));
  }
}
