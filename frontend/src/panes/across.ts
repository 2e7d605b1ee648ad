// The "across versions" view: which installed JAX versions to run on, and the
// server's answer (src/model/across-versions.ts reads it): per output where it first changed with
// the diff at that step (and any later steps, folded), each version's outcome, and
// the times table. Everything from the server is set as text.
import { diffLineKind, NOTABLE_RATIO, outputTitle, timesTable, verdict, type AcrossAnswerT, type OutputChange } from "../model/across-versions";
import { h } from "../util/dom";

export type AcrossStatus = "idle" | "running" | "ok" | "error" | "cancelled";

export class AcrossView {
  private picks: HTMLElement;
  private statusEl: HTMLElement;
  private result: HTMLElement;
  private boxes: HTMLInputElement[] = [];

  constructor(
    readonly root: HTMLElement,
    private readonly onTicked: (versions: string[]) => void,
  ) {
    this.picks = h("div", { class: "across-picks", role: "group", "aria-label": "JAX versions to run on", "data-testid": "across-versions" });
    this.statusEl = h("p", { class: "across-status", role: "status", "aria-live": "polite", "data-status": "idle", "data-testid": "across-status" });
    this.result = h("div", { class: "across-result", "data-testid": "across-result" });
    root.append(
      h("h2", { class: "pipeline-title" }, "Across versions"),
      h("p", { class: "across-help" }, "Run shows, for each output, the first version where it changed from the one before, with the diff at that step, and the compile and run times of each version. Each version is a run of its own, oldest first."),
      this.picks,
      this.statusEl,
      this.result,
    );
    this.setStatus("idle", "Tick the versions, then Run.");
  }

  /** The installed versions to offer (oldest first) and those ticked. */
  setVersions(offered: string[], ticked: string[]): void {
    this.boxes = offered.map((v) => {
      const box = h("input", { type: "checkbox", value: v, id: `across-${v}`, checked: ticked.includes(v) });
      box.addEventListener("change", () => this.onTicked(this.ticked()));
      return box;
    });
    if (offered.length === 0) this.picks.replaceChildren(h("span", { class: "across-help" }, "This server lists no JAX versions to choose from."));
    else this.picks.replaceChildren(...this.boxes.map((box) => h("label", { for: box.id, class: "inline" }, box, box.value)));
  }

  ticked(): string[] {
    return this.boxes.filter((b) => b.checked).map((b) => b.value);
  }

  setStatus(status: AcrossStatus, text: string): void {
    this.statusEl.dataset.status = status;
    // styled by class: no style reads a data-status (the run status's changes at a
    // run's start draw no frame, panes/render.ts START_DRAW_MS)
    this.statusEl.classList.toggle("bad", status === "error");
    this.statusEl.textContent = text;
  }

  clearResult(): void {
    this.result.replaceChildren();
  }

  show(answer: AcrossAnswerT): void {
    const failed = answer.versions.filter((v) => v.status !== "ok");
    const outcome = h(
      "ul",
      { class: "across-outcomes", "data-testid": "across-outcomes" },
      answer.versions.map((v) =>
        h(
          "li",
          { "data-version": v.version, "data-status": v.status, class: v.status === "ok" ? null : "bad" },
          h("strong", {}, v.version),
          ` ${v.status}`,
          v.jax_version && v.jax_version !== v.version ? ` (ran jax ${v.jax_version})` : "",
          v.reason ? ` — ${v.reason}` : "",
          ...Object.entries(v.errors ?? {}).map(([pipeline, message]) => h("div", { class: "mono across-error" }, `${pipeline === "main" ? "" : "B: "}${message}`)),
        ),
      ),
    );
    const rows = answer.outputs.map((o) =>
      h(
        "tr",
        { "data-output": o.output, "data-pipeline": o.pipeline, class: o.first_changed === null ? "same" : "changed" },
        h("th", { scope: "row" }, outputTitle(o.output, o.pipeline)),
        h("td", { "data-testid": "first-changed" }, o.first_changed ?? "—"),
        h("td", {}, verdict(o)),
      ),
    );
    const table = h("table", { class: "across-outputs", "data-testid": "across-outputs" }, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "output"), h("th", { scope: "col" }, "first changed in"), h("th", { scope: "col" }, "what changed"))), h("tbody", {}, rows));
    const diffs = answer.outputs.filter((o) => o.changes.length > 0).map((o) => this.diffs(o));
    this.result.replaceChildren(
      h("h3", {}, "Versions"),
      outcome,
      h("h3", {}, "Outputs"),
      answer.outputs.length > 0 ? table : h("p", { class: "across-help" }, "No version produced an output to compare."),
      ...diffs,
      h("h3", {}, "Times (timing: median per call)"),
      this.times(answer),
    );
    this.setStatus(failed.length === 0 ? "ok" : "error", failed.length === 0 ? `Done: ${answer.versions.length} versions compared.` : `Done: ${failed.length} of ${answer.versions.length} versions did not end ok (see below).`);
  }

  /** The first change open, each later one folded. */
  private diffs(o: OutputChange): HTMLElement {
    return h(
      "section",
      { class: "across-diffs", "data-output": o.output, "data-pipeline": o.pipeline, "data-testid": "across-diff" },
      o.changes.map((c, i) =>
        h(
          "details",
          { open: i === 0 },
          h("summary", {}, `${outputTitle(o.output, o.pipeline)}: ${c.from} → ${c.to}`),
          h(
            "pre",
            { class: "across-diff mono" },
            c.diff.split("\n").map((line) => h("span", { class: `diff-${diffLineKind(line)}` }, line, "\n")),
          ),
        ),
      ),
    );
  }

  private times(answer: AcrossAnswerT): HTMLElement {
    const t = timesTable(answer.times);
    return h(
      "div",
      { class: "across-scroll" },
      h(
        "table",
        { class: "across-times", "data-testid": "across-times" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "version"), t.columns.map((c) => h("th", { scope: "col" }, c)))),
        h(
          "tbody",
          {},
          t.rows.map((r) =>
            h(
              "tr",
              { "data-version": r.version },
              h("th", { scope: "row" }, r.version),
              r.cells.map((c) => h("td", { class: c.trend ?? "", title: c.trend ? `${c.trend} than the version before (×${NOTABLE_RATIO} or more)` : null }, c.text)),
            ),
          ),
        ),
      ),
    );
  }
}
