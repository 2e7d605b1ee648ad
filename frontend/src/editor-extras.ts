// The editor's extras, loaded just after the first screen (a chunk of their own, out
// of the entry's): Python's parser (highlighting, indentation), completion, closing
// brackets, search. The editor is usable without them for the moment they take.
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from "@codemirror/autocomplete";
import { python } from "@codemirror/lang-python";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import type { Extension } from "@codemirror/state";
import { keymap } from "@codemirror/view";

/** `before`: the keys that go ahead of the default keymap (closing brackets' Backspace);
 * `after`: the rest, after it, as one keymap list placed them before. */
export function editorExtras(): { before: Extension; after: Extension } {
  return {
    before: keymap.of(closeBracketsKeymap),
    after: [closeBrackets(), autocompletion(), highlightSelectionMatches(), python(), keymap.of([...searchKeymap, ...completionKeymap])],
  };
}
