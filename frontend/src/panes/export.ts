// Export: what `jax.export` makes of each pipeline (docs/api.md#export): the in and out
// avals as JAX prints them, the platforms, the calling convention, the StableHLO, the
// serialized artifact (a download) and its round trip in a fresh process.
import { clear, h } from "../util/dom";
import type { EventOf } from "../connection/protocol";
import { PerPipelinePane } from "./pane";

type Export = EventOf<"export">;

/** The artifact as a file to save: its bytes from the event's base64. */
export function artifactBlob(base64: string): Blob {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return new Blob([bytes], { type: "application/octet-stream" });
}

export class ExportPane extends PerPipelinePane<"export"> {
  readonly consumes = ["export"] as const;

  constructor(root: HTMLElement) {
    super(root);
    this.render();
  }

  private download(ev: Export): HTMLElement | null {
    if (!ev.artifact) return null;
    const link = h("a", { class: "linklike", download: `${ev.function}.jax_exported`, "data-testid": "export-download" }, `Download the artifact (${(ev.artifact_bytes ?? 0).toLocaleString()} bytes)`);
    const artifact = ev.artifact;
    link.addEventListener("click", () => {
      const url = URL.createObjectURL(artifactBlob(artifact));
      link.setAttribute("href", url);
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
    return link;
  }

  private exported(ev: Export): HTMLElement {
    const rows: [string, string][] = [
      ["function", ev.function],
      ["shapes asked", ev.shapes.map((s) => s ?? "(its own)").join(" · ")],
      ["in avals", ev.in_avals.join(", ")],
      ["out avals", ev.out_avals.join(", ")],
      ["platforms", ev.platforms.join(", ")],
      ["calling convention", String(ev.calling_convention_version)],
    ];
    const trips = ev.roundtrip.map((c) =>
      h(
        "li",
        { "data-testid": "export-roundtrip", "data-equal": String(c.equal) },
        `${c.source === "arguments" ? "the arguments" : "other sizes"}: ${c.inputs.join(", ")} → `,
        c.error ? h("span", { class: "bad" }, c.error) : `${c.outputs.join(", ")}, ${c.equal ? "equal to the pipeline's own result" : `differs (max |Δ| ${String(c.max_abs_diff)})`}`,
      ),
    );
    return h(
      "div",
      { class: "export" },
      h("table", { class: "export-facts" }, ...rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", { class: "mono", "data-testid": `export-${k.replace(/ /g, "-")}` }, v)))),
      this.download(ev),
      trips.length ? h("div", {}, h("h4", {}, "Round trip (deserialized in a fresh process)"), h("ul", {}, ...trips)) : null,
      ...(ev.notes ?? []).map((n) => h("p", { class: "pane-note" }, n)),
      h("details", {}, h("summary", {}, "StableHLO"), h("pre", { class: "mono export-stablehlo", tabindex: 0 }, ev.stablehlo)),
    );
  }

  protected render(): void {
    clear(this.root);
    if (this.events.size === 0) {
      this.root.append(h("p", { class: "pane-note" }, this.ended ? "No export in this run (an error says why, if one stopped it)." : "Waiting for the export…"));
      return;
    }
    for (const p of this.pipelines) {
      const ev = this.events.get(p);
      if (!ev) continue;
      this.root.append(h("section", {}, this.pipelines.length > 1 ? h("h3", {}, this.labels[p] ?? p) : null, this.exported(ev)));
    }
  }
}
