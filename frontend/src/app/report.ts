// Report: the request stored as a snippet (as Share does), then links to its bug report
// for JAX's issue form (GET /api/v1/snippets/{id}/report.md and report.ipynb), with the
// last across-versions comparison's versions, so the report says where it first changed.
import { h } from "../util/dom";
import type { RunBody } from "../generated/request";
import { shareRequest } from "./share";

/** The report's address for a snippet; `versions`: an across comparison's. */
export function reportPath(id: string, kind: "md" | "ipynb", versions: string[] | null): string {
  const across = versions && versions.length > 1 ? `?across=${encodeURIComponent(versions.join(","))}` : "";
  return `/api/v1/snippets/${encodeURIComponent(id)}/report.${kind}${across}`;
}

export interface ReportHooks {
  request: () => RunBody | null;
  acrossVersions: () => string[] | null;
  toast: (...content: (Node | string)[]) => void;
}

/** The **Report** button (after `anchor`): the report's two forms in a toast. */
export function installReportButton(anchor: HTMLElement, hooks: ReportHooks): HTMLElement {
  const button = h("button", { type: "button", id: "report", title: "a bug report for JAX's issue form: a repro plain JAX runs, the environment, the HLO" }, "Report");
  anchor.after(button);
  button.addEventListener("click", async () => {
    const request = hooks.request();
    if (request === null) {
      hooks.toast("Fix the transform options before reporting.");
      return;
    }
    const shared = await shareRequest(request, { origin: location.origin, setPath: (path) => history.replaceState(null, "", path), copy: async () => {} });
    if ("problem" in shared) {
      hooks.toast(shared.problem.replace("Could not share", "Could not make the report"));
      return;
    }
    const id = shared.url.pathname.split("/").pop() ?? "";
    const versions = hooks.acrossVersions();
    const link = (kind: "md" | "ipynb", label: string) => h("a", { href: reportPath(id, kind, versions), target: "_blank", rel: "noopener", "data-testid": `report-${kind}` }, label);
    hooks.toast("Bug report: ", link("md", "Markdown"), " · ", link("ipynb", "notebook"), versions && versions.length > 1 ? ` (with where it first changed across ${versions.join(", ")})` : "");
  });
  return button;
}
