// Linking: hovering and pinning, against fake views (the drawing is editor/linking.ts's).
import { describe, expect, it } from "vitest";
import type { EditorView } from "@codemirror/view";
import { LinkingController } from "../../src/app/linking-controller";

function setup() {
  const editor = { name: "editor" } as unknown as EditorView;
  const output = { name: "jaxpr" } as unknown as EditorView;
  const drawn: string[] = [];
  const graph: string[] = [];
  const notes: (number | null)[] = [];
  const name = (v: EditorView) => (v as unknown as { name: string }).name;
  const c = new LinkingController(
    {
      editor: () => editor,
      outputs: () => [output],
      graph: () => ({ setLinked: (s, p) => void graph.push(`${s}/${p}`) }),
      pinned: (line) => void notes.push(line),
    },
    {
      show: (v, shown, reveal, pinned) => void drawn.push(`${name(v)} ${shown} ${reveal} ${pinned}`),
      first: (_v, line) => line * 10,
    },
  );
  return { c, editor, output, drawn, graph, notes };
}

describe("LinkingController", () => {
  it("lights a code line's partners, revealing them on the other side", () => {
    const { c, editor, drawn, graph } = setup();
    c.hover(3, editor);
    expect(drawn).toEqual(["editor 3 null null", "jaxpr 3 30 null"]);
    expect(graph).toEqual(["3/null"]);
  });

  it("reveals the code line when an output line is hovered", () => {
    const { c, output, drawn } = setup();
    c.hover(4, output);
    expect(drawn).toEqual(["editor 4 4 null", "jaxpr 4 null null"]);
  });

  it("keeps a pinned line shown off hover, until it is clicked again", () => {
    const { c, drawn, notes } = setup();
    c.pin(5);
    expect(notes).toEqual([5]);
    drawn.length = 0;
    c.hover(null, null);
    expect(drawn).toEqual(["editor 5 null 5", "jaxpr 5 null 5"]);
    c.pin(5);
    expect(notes).toEqual([5, null]);
    expect(c.pinned).toBeNull();
  });
});
