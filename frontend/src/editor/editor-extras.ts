// The editor's extras, loaded just after the first screen (a chunk of their own, out
// of the entry's): Python's parser (highlighting, indentation), completion, closing
// brackets, search. The editor is usable without them for the moment they take.
// Completion offers JAX's and the libraries' names too (editor/completions.ts).
import { autocompletion, closeBrackets, closeBracketsKeymap, completionKeymap } from "@codemirror/autocomplete";
import { python, pythonLanguage } from "@codemirror/lang-python";
import { highlightSelectionMatches, searchKeymap } from "@codemirror/search";
import type { Extension } from "@codemirror/state";
import { keymap } from "@codemirror/view";
import { jaxCompletions } from "./completions";

/** `before`: the keys that go ahead of the default keymap (closing brackets' Backspace);
 * `after`: the rest, after it, as one keymap list placed them before. */
export function editorExtras(jaxVersion: () => string | undefined = () => undefined): { before: Extension; after: Extension } {
  const jax = pythonLanguage.data.of({ autocomplete: jaxCompletions(jaxVersion) });
  return {
    before: keymap.of(closeBracketsKeymap),
    after: [closeBrackets(), autocompletion(), highlightSelectionMatches(), python(), jax, keymap.of([...searchKeymap, ...completionKeymap])],
  };
}
