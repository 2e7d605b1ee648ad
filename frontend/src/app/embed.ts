// The embed view (`/e/{id}`, made for an iframe in docs and tutorials): the snippet's
// code and outputs, read-only and compact, with "open in jaxplay" (its `/s/{id}` page,
// in a new tab). The server decides which sites may frame it (JAXPLAY_EMBED_FRAME_ANCESTORS).
import { EditorState, StateEffect } from "@codemirror/state";
import { EditorView } from "@codemirror/view";
import { h } from "../util/dom";

export function embedIdFromPath(path: string): string | null {
  const m = /^\/e\/([A-Za-z0-9_-]+)\/?$/.exec(path);
  return m ? m[1]! : null;
}

export interface EmbedParts {
  topbar: HTMLElement;
  entry: HTMLInputElement;
  args: HTMLInputElement;
}

/** Turns the page into the embed view of snippet `id`. */
export function becomeEmbed(id: string, parts: EmbedParts, editor: EditorView, pipeline: () => string): void {
  document.body.classList.add("embed");
  editor.dispatch({ effects: StateEffect.appendConfig.of([EditorState.readOnly.of(true), EditorView.editable.of(false)]) });
  parts.entry.readOnly = true;
  parts.args.readOnly = true;
  const open = h("a", { class: "embed-open", href: `/s/${encodeURIComponent(id)}`, target: "_blank", rel: "noopener", "data-testid": "open-in-jaxplay" }, "open in jaxplay ↗");
  const summary = h("code", { class: "embed-pipeline", "data-testid": "embed-pipeline" }, pipeline());
  parts.topbar.append(h("div", { class: "embed-bar" }, summary, open));
}
