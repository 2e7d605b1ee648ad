// The export output's two request fields as the page types them: `exportShapes`, one
// symbolic shape per argument in JAX's syntax, separated by `;` (an empty one: that
// argument's own shape), and `exportPlatforms`, comma-separated (`cpu, cuda, tpu`).
// Sent only when the export output is ticked and the field is not empty.
import { RunRequest } from "../generated/request";
import { parsedOrNull } from "../util/narrow";

export interface ExportState {
  exportShapes?: string;
  exportPlatforms?: string;
}

/** `"b, 3; "` → `["b, 3", null]`; empty → null (the arguments' own shapes). */
export function parseShapes(text: string): (string | null)[] | null {
  if (!text.trim()) return null;
  return text.split(";").map((s) => (s.trim() ? s.trim() : null));
}

/** The request's export fields for `state`, and what does not parse. */
export function exportRequest(state: ExportState, problems: string[] = []): Pick<RunRequest, "export_shapes" | "export_platforms"> {
  const out: Pick<RunRequest, "export_shapes" | "export_platforms"> = {};
  const shapes = parseShapes(state.exportShapes ?? "");
  if (shapes !== null) {
    if (parsedOrNull(RunRequest.shape.export_shapes, shapes) === null) problems.push(`export shapes: "${state.exportShapes}" is not one shape per argument in JAX's syntax`);
    else out.export_shapes = shapes;
  }
  const platforms = (state.exportPlatforms ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  if (platforms.length) {
    const parsed = parsedOrNull(RunRequest.shape.export_platforms, platforms);
    if (parsed === null) problems.push(`export platforms: each of cpu, cuda, rocm, tpu, at most 4 (got "${state.exportPlatforms}")`);
    else out.export_platforms = parsed;
  }
  return out;
}

/** A stored request's export fields back as typed text. */
export function exportFromRequest(d: Record<string, unknown>): ExportState {
  const shapes = parsedOrNull(RunRequest.shape.export_shapes, d.export_shapes);
  const platforms = parsedOrNull(RunRequest.shape.export_platforms, d.export_platforms);
  return { exportShapes: shapes ? shapes.map((s) => s ?? "").join("; ") : "", exportPlatforms: platforms ? platforms.join(", ") : "" };
}
