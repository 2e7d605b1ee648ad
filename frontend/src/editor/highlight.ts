// Token classes (styled in style.css for both themes): Lezer's class highlighter
// plus the tags the jaxpr/MLIR/HLO modes use for primitives and attributes.
import { syntaxHighlighting } from "@codemirror/language";
import { classHighlighter, tagHighlighter, tags } from "@lezer/highlight";

const extra = tagHighlighter([
  { tag: tags.standard(tags.variableName), class: "tok-builtin" },
  { tag: tags.attributeName, class: "tok-attribute" },
  { tag: tags.bracket, class: "tok-bracket" },
]);

export const highlighting = [syntaxHighlighting(extra), syntaxHighlighting(classHighlighter)];
