// Share: the request stored as a snippet (POST /api/v1/snippets); the page's address
// becomes its link, copied to the clipboard when the page may.
import { h } from "../util/dom";
import type { RunBody } from "../generated/request";
import { ApiError, SnippetCreated } from "../connection/protocol";

export type Shared = { url: URL; copied: boolean } | { problem: string };

export interface ShareHooks {
  fetch?: typeof fetch;
  origin: string;
  /** the page's address becomes the link (history.replaceState) */
  setPath: (path: string) => void;
  /** the link's fragment (#out=…: the output on show, where the link opens) */
  hash?: string;
  /** copies the link; throws without the permission */
  copy: (text: string) => Promise<void>;
}

export async function shareRequest(request: RunBody, hooks: ShareHooks): Promise<Shared> {
  try {
    const r = await (hooks.fetch ?? fetch)("/api/v1/snippets", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(request) });
    const body: unknown = await r.json();
    if (!r.ok) {
      const err = ApiError.safeParse(body);
      return { problem: `Could not share: ${err.success ? err.data.message : r.statusText}` };
    }
    const created = SnippetCreated.safeParse(body);
    if (!created.success) return { problem: "Could not share: the server's answer did not validate." };
    const url = new URL(created.data.url, hooks.origin);
    if (hooks.hash) url.hash = hooks.hash;
    hooks.setPath(url.pathname + url.hash);
    let copied = false;
    try {
      await hooks.copy(url.href);
      copied = true;
    } catch {
      // no clipboard permission: the link is shown selected, for copying by hand
    }
    return { url, copied };
  } catch (e) {
    return { problem: `Could not share: ${(e as Error).message}` };
  }
}

export interface ShareButtonHooks {
  /** the request to share; null when it cannot be made */
  request: () => RunBody | null;
  toast: (...content: (Node | string)[]) => void;
  /** the fragment naming the output on show (#out=…): the link opens there */
  hash?: () => string;
}

/** The Share button: the link shown in a toast, selected (copied when the page may). */
export function installShareButton(button: HTMLElement, hooks: ShareButtonHooks): void {
  button.addEventListener("click", async () => {
    const request = hooks.request();
    if (request === null) {
      hooks.toast("Fix the transform options before sharing.");
      return;
    }
    const shared = await shareRequest(request, {
      origin: location.origin,
      setPath: (path) => history.replaceState(null, "", path),
      ...(hooks.hash ? { hash: hooks.hash() } : {}),
      copy: (text) => navigator.clipboard.writeText(text),
    });
    if ("problem" in shared) {
      hooks.toast(shared.problem);
      return;
    }
    const field = h("input", { class: "mono share-link", readonly: true, value: shared.url.href, "aria-label": "Link to this snippet", "data-testid": "share-link" });
    hooks.toast(shared.copied ? "Link copied: " : "Link: ", field);
    field.select();
  });
}
