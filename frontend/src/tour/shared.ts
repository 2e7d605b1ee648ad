// What the tour's light entry (tour/entry.ts, in the page's first chunk) and its
// controller (tour/tour.ts, loaded when the tour opens) share: the page's parts the
// tour drives, and whether a tour is open.
import type { EditorView } from "@codemirror/view";
import type { PlayStore } from "../app/store";
import type { TabId } from "../model/tabtable";
import type { Layout } from "../app/layout";

export interface TourDeps {
  ui: Layout;
  store: PlayStore;
  editor: () => EditorView;
  pickTab: (id: TabId) => void;
  run: () => void;
  storage: Storage | null;
}

let open = false;

/** A tour is open: the page's autosave is left alone (the reader's own code is there;
 * the steps are not theirs), written again once the tour closes. */
export function touring(): boolean {
  return open;
}

export function setTouring(value: boolean): void {
  open = value;
}
