// Source <-> output linking, as Compiler Explorer does it for assembly: every code line
// that produced output gets a colour band (the same colour in the editor and in every
// output pane), and hovering a line on either side highlights its partners.
// The engine sends the map ({out_line, line}, both 1-based); nothing is parsed here.
import { RangeSetBuilder, StateEffect, StateField, type Extension } from "@codemirror/state";
import { Decoration, EditorView, ViewPlugin, type DecorationSet, type ViewUpdate } from "@codemirror/view";

export const BAND_COUNT = 8;

/** The colour of a code line: stable across panes, pipelines and runs. */
export function bandOf(codeLine: number): number {
  return (codeLine - 1) % BAND_COUNT;
}

/** out_line -> code line; later entries for the same out_line win (innermost frame). */
export function sourceMap(sources: { out_line: number; line: number }[] | null | undefined): Map<number, number> {
  const map = new Map<number, number>();
  for (const s of sources ?? []) if (s.out_line > 0 && s.line > 0) map.set(s.out_line, s.line);
  return map;
}

export const setHovered = StateEffect.define<number | null>();
/** The code line pinned by a click: its lines stay marked until it is clicked again. */
export const setPinned = StateEffect.define<number | null>();
export const setSources = StateEffect.define<Map<number, number>>();
export const setBandLines = StateEffect.define<Set<number>>();

interface Linked {
  /** output views: out line -> code line; the editor: code line -> itself */
  map: Map<number, number>;
  hovered: number | null;
  pinned: number | null;
}

function field(kind: "output" | "editor") {
  return StateField.define<{ linked: Linked }>({
    create: () => ({ linked: { map: new Map(), hovered: null, pinned: null } }),
    update(value, tr) {
      let { map, hovered, pinned } = value.linked;
      let changed = false;
      for (const e of tr.effects) {
        if (e.is(setHovered)) {
          if (e.value !== hovered) changed = true;
          hovered = e.value;
        } else if (e.is(setPinned)) {
          if (e.value !== pinned) changed = true;
          pinned = e.value;
        } else if (kind === "output" && e.is(setSources)) {
          map = e.value;
          changed = true;
        } else if (kind === "editor" && e.is(setBandLines)) {
          map = new Map([...e.value].map((l) => [l, l]));
          changed = true;
        }
      }
      return changed ? { linked: { map, hovered, pinned } } : value;
    },
  });
}

/** The bands and links of the lines CodeMirror draws (its viewport), drawn again when
 * the viewport, the text or the links change: a 30,000-line HLO whose every line has a
 * band costs the lines on screen per hover, not 30,000 decorations (issue 32). */
function bands(f: StateField<{ linked: Linked }>): Extension {
  const build = (view: EditorView): DecorationSet => {
    const { map, hovered, pinned } = view.state.field(f).linked;
    const builder = new RangeSetBuilder<Decoration>();
    if (map.size === 0) return builder.finish();
    const doc = view.state.doc;
    const { from, to } = view.viewport;
    for (let n = doc.lineAt(from).number, last = doc.lineAt(to).number; n <= last; n++) {
      const code = map.get(n);
      if (code === undefined) continue;
      const cls = `cm-band cm-band-${bandOf(code)}${code === hovered ? " cm-linked" : ""}${code === pinned ? " cm-pinned" : ""}`;
      const pos = doc.line(n).from;
      builder.add(pos, pos, Decoration.line({ class: cls, attributes: { "data-src-line": String(code) } }));
    }
    return builder.finish();
  };
  return ViewPlugin.fromClass(
    class {
      deco: DecorationSet;
      constructor(view: EditorView) {
        this.deco = build(view);
      }
      update(u: ViewUpdate): void {
        if (u.docChanged || u.viewportChanged || u.startState.field(f) !== u.state.field(f)) this.deco = build(u.view);
      }
    },
    { decorations: (v) => v.deco },
  );
}

const outputField = field("output");
const editorField = field("editor");

/** The code line under the pointer, or under the cursor, of `view`; null if none. */
function codeLineAt(view: EditorView, lineNumber: number, kind: "output" | "editor"): number | null {
  const linked = view.state.field(kind === "output" ? outputField : editorField).linked;
  return linked.map.get(lineNumber) ?? null;
}

function handlers(kind: "output" | "editor", onHover: (codeLine: number | null, from: EditorView) => void, onPin?: (codeLine: number) => void): Extension {
  let last: number | null | undefined;
  const report = (line: number | null, view: EditorView): void => {
    if (line === last) return;
    last = line;
    onHover(line, view);
  };
  return [
    EditorView.domEventHandlers({
      mousemove(event, view) {
        const pos = view.posAtCoords({ x: event.clientX, y: event.clientY }, false);
        if (pos === null) {
          report(null, view);
          return false;
        }
        report(codeLineAt(view, view.state.doc.lineAt(pos).number, kind), view);
        return false;
      },
      mouseleave(_event, view) {
        report(null, view);
        return false;
      },
      click(event, view) {
        if (!onPin) return false;
        const pos = view.posAtCoords({ x: event.clientX, y: event.clientY }, false);
        const line = pos === null ? null : codeLineAt(view, view.state.doc.lineAt(pos).number, kind);
        if (line !== null) onPin(line);
        return false;
      },
    }),
    // Keyboard users link by moving the cursor.
    EditorView.updateListener.of((update) => {
      if (!update.selectionSet || !update.view.hasFocus) return;
      const line = update.state.doc.lineAt(update.state.selection.main.head).number;
      report(codeLineAt(update.view, line, kind), update.view);
    }),
  ];
}

export function outputLinking(onHover: (codeLine: number | null, from: EditorView) => void, onPin?: (codeLine: number) => void): Extension {
  return [outputField, bands(outputField), handlers("output", onHover, onPin)];
}

export function editorLinking(onHover: (codeLine: number | null, from: EditorView) => void): Extension {
  return [editorField, bands(editorField), handlers("editor", onHover)];
}

/** The first output line of `view` linked to `codeLine`, for scrolling it into view. */
export function firstLinkedLine(view: EditorView, codeLine: number): number | null {
  let first: number | null = null;
  const linked = view.state.field(outputField, false)?.linked;
  for (const [out, code] of linked?.map ?? []) if (code === codeLine && (first === null || out < first)) first = out;
  return first;
}

/** Shows `codeLine` as hovered in `view` and scrolls it into view if asked. */
export function showHovered(view: EditorView, codeLine: number | null, scrollTo: number | null, pinned: number | null = null): void {
  const effects: StateEffect<unknown>[] = [setHovered.of(codeLine), setPinned.of(pinned)];
  if (scrollTo !== null && scrollTo >= 1 && scrollTo <= view.state.doc.lines) {
    effects.push(EditorView.scrollIntoView(view.state.doc.line(scrollTo).from, { y: "nearest" }));
  }
  view.dispatch({ effects });
}
