// Linking: hover a line on one side, its partners light up on the other; a click on a
// linked line (code line number, output line, graph node) pins its links, shown while
// the pointer is elsewhere, until it is clicked again. The views are the targets'
// (the editor, the output pane on show, the graph); the drawing is editor/linking.ts's.
import type { EditorView } from "@codemirror/view";

export interface LinkTargets {
  /** the code editor */
  editor: () => EditorView;
  /** the text views of the output pane on show */
  outputs: () => EditorView[];
  /** the graph, once loaded */
  graph: () => { setLinked(shown: number | null, pinned: number | null): void } | null;
  /** says which line is pinned (null: none) */
  pinned: (line: number | null) => void;
}

export interface LinkDrawing {
  /** editor/linking.ts's showHovered: lights `shown`'s partners in `view`, scrolls to `reveal` */
  show: (view: EditorView, shown: number | null, reveal: number | null, pinned: number | null) => void;
  /** editor/linking.ts's firstLinkedLine: the first output line of `codeLine` in `view` */
  first: (view: EditorView, codeLine: number) => number | null;
}

export class LinkingController {
  hovered: number | null = null;
  pinned: number | null = null;

  constructor(
    private readonly targets: LinkTargets,
    private readonly draw: LinkDrawing,
  ) {}

  /** The pointer is on `codeLine`'s partner in `from` (null: off every line). */
  hover(codeLine: number | null, from: EditorView | null): void {
    this.hovered = codeLine;
    const editor = this.targets.editor();
    const fromEditor = from === editor;
    const shown = codeLine ?? this.pinned;
    this.draw.show(editor, shown, !fromEditor && codeLine !== null ? codeLine : null, this.pinned);
    for (const view of this.targets.outputs()) {
      this.draw.show(view, shown, fromEditor && codeLine !== null ? this.draw.first(view, codeLine) : null, this.pinned);
    }
    this.targets.graph()?.setLinked(shown, this.pinned);
  }

  /** A click on `codeLine`'s partner: pins it, or unpins it when it is pinned. */
  pin(codeLine: number): void {
    this.pinned = this.pinned === codeLine ? null : codeLine;
    this.targets.pinned(this.pinned);
    this.refresh();
  }

  /** Draws the hovered and pinned lines again (a pane shown, a text arrived). */
  refresh(): void {
    this.hover(this.hovered, null);
  }
}
