// What the page shows first: a shared link's snippet (embedded in the page, or
// fetched), painted at once when the server sent its results with the page
// (connection/initial.ts) and else run at once; without a link, the reader's autosave.
import { DEFAULT_STATE } from "../model/examples";
import { embeddedSnippet, fromRequest, loadAutosave, snippetIdFromPath, toRequest } from "../model/state";
import { readInitial } from "../connection/initial";
import type { OutputsController } from "./outputs";
import type { RunController } from "./run";
import type { PlayStore } from "./store";

export interface StartDeps {
  store: PlayStore;
  outputs: OutputsController;
  runs: RunController;
  /** the snippet id of an embed view's address (/e/{id}), or null */
  embedId: string | null;
  /** the page becomes the embed view (after the snippet is shown) */
  becomeEmbed: (id: string) => void;
  loadBackends: () => Promise<void>;
  run: () => Promise<void>;
  fetch?: typeof fetch;
}

export async function startPage(d: StartDeps): Promise<void> {
  const { store } = d;
  // a shared link whose results the server sent with the page
  const initial = readInitial(document);
  let snippet = embeddedSnippet(document) ?? initial?.request ?? null;
  const id = snippetIdFromPath(location.pathname) ?? d.embedId;
  if (!snippet && id) {
    try {
      const r = await (d.fetch ?? fetch)(`/api/v1/snippets/${encodeURIComponent(id)}`);
      if (r.ok) snippet = await r.json();
    } catch {
      // shown as the default state
    }
  }
  if (!snippet) {
    store.show(loadAutosave(DEFAULT_STATE) ?? DEFAULT_STATE);
    void d.loadBackends();
    return;
  }
  store.show(fromRequest(snippet, DEFAULT_STATE));
  if (d.embedId !== null) d.becomeEmbed(d.embedId);
  if (initial) {
    // painted at once, as a run's events; later runs are live as usual
    const request = toRequest(store.state, []);
    d.outputs.label(store.state, request);
    d.runs.paint(request, initial.events);
    // outputs no cache keeps (timing): the run as usual brings them
    if (initial.pending.length > 0) void d.runs.follow(request);
  }
  void d.loadBackends();
  // a shared link shows its results at once (from the cache when it has them); the
  // entry may have sent its run already (connection/socket.ts): the page's adopts it
  if (!initial) void d.run().finally(() => d.runs.dropEarly());
}
