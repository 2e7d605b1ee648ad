// Notebook import: an .ipynb dropped on the page or opened with **Open .ipynb** becomes
// a snippet (POST /api/v1/snippets/import: code cells joined, ! and % lines dropped,
// the entry its last top-level def) and the page goes to its link.
import { h } from "../util/dom";
import { ApiError } from "../connection/protocol";

export type Imported = { url: string; dropped: number } | { problem: string };

export async function importNotebook(text: string, fetcher: typeof fetch = fetch): Promise<Imported> {
  try {
    const r = await fetcher("/api/v1/snippets/import", { method: "POST", headers: { "Content-Type": "application/x-ipynb+json" }, body: text });
    const body: unknown = await r.json();
    if (!r.ok) {
      const err = ApiError.safeParse(body);
      return { problem: `Could not import the notebook: ${err.success ? err.data.message : r.statusText}` };
    }
    const answer = body as { url?: unknown; dropped?: unknown };
    if (typeof answer.url !== "string" || !Array.isArray(answer.dropped)) return { problem: "Could not import the notebook: the server's answer did not validate." };
    return { url: answer.url, dropped: answer.dropped.length };
  } catch (e) {
    return { problem: `Could not import the notebook: ${(e as Error).message}` };
  }
}

function isNotebook(file: File): boolean {
  return file.name.toLowerCase().endsWith(".ipynb");
}

/** The **Open .ipynb** button (after `anchor`) and dropping a notebook anywhere on the page. */
export function installNotebookImport(anchor: HTMLElement, hooks: { toast: (...content: (Node | string)[]) => void; go?: (url: string) => void }): HTMLElement {
  const go = hooks.go ?? ((url: string) => location.assign(url));
  const input = h("input", { type: "file", accept: ".ipynb,application/x-ipynb+json", hidden: true, "data-testid": "notebook-file" }) as HTMLInputElement;
  const button = h("button", { type: "button", id: "open-notebook", title: "open a Jupyter notebook (.ipynb) as a snippet: its code cells, without ! and % lines" }, "Open .ipynb");
  anchor.after(button, input);
  const take = async (file: File) => {
    if (!isNotebook(file)) {
      hooks.toast(`${file.name} is not a notebook (.ipynb).`);
      return;
    }
    hooks.toast(`Importing ${file.name}…`);
    const imported = await importNotebook(await file.text());
    if ("problem" in imported) {
      hooks.toast(imported.problem);
      return;
    }
    go(imported.url);
  };
  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    const file = input.files?.[0];
    input.value = "";
    if (file) void take(file);
  });
  document.addEventListener("dragover", (e) => {
    if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
  });
  // Captured before the editor sees it: CodeMirror would read a dropped file into the
  // code (and the autosave) before the page leaves for the notebook's link.
  document.addEventListener(
    "drop",
    (e) => {
      const file = [...(e.dataTransfer?.files ?? [])].find(isNotebook);
      if (!file) return; // not ours: the editor takes dropped text as before
      e.preventDefault();
      e.stopPropagation();
      void take(file);
    },
    { capture: true },
  );
  return button;
}
