// The op documentation on hover (jaxpr primitives, StableHLO/HLO ops), with its tables
// (editor/opdocs.ts and its ~100 KB of generated JSON) loaded on the first hover: out of the
// first screen's chunk.
import type { Extension } from "@codemirror/state";
import { hoverTooltip } from "@codemirror/view";
import { h } from "../util/dom";

type DocKind = "jaxpr" | "stablehlo" | "hlo";

let docs: Promise<typeof import("./opdocs")> | null = null;

/** A CodeMirror extension: documentation of the op under the pointer. */
export function opDocsTooltip(kind: DocKind): Extension {
  return hoverTooltip(async (view, pos) => {
    const { opAt, docFor, docElement } = await (docs ??= import("./opdocs"));
    const line = view.state.doc.lineAt(pos);
    const found = opAt(kind, line.text, pos - line.from);
    if (!found) return null;
    const doc = docFor(kind, found.op)!;
    return {
      pos: line.from + found.from,
      end: line.from + found.to,
      above: false,
      create: () => ({ dom: h("div", { class: "op-doc", role: "tooltip" }, docElement(doc)) }),
    };
  });
}
