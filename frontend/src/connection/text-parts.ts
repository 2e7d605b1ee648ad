// An IR text longer than one event allows comes as its event (with `parts`) and then
// that many `text_part` events (docs/api.md, "Big texts"). The panes draw one whole
// text: this joins the pieces back into the event they came from, so nothing after
// it knows the text was ever split. The event's own text past `shown_chars` is a
// note for clients that ignore parts ("… N more characters follow"): dropped once
// the parts are joined.
import type { RunEvent } from "./protocol";

type IrType = "jaxpr" | "stablehlo" | "hlo";
type IrEvent = Extract<RunEvent, { type: IrType }>;
type PartEvent = Extract<RunEvent, { type: "text_part" }>;

type Sources = NonNullable<IrEvent["sources"]>;

interface Pending {
  event: IrEvent;
  texts: string[];
  /** each part's source map, joined once at the end (one copy, not one per part) */
  sources: Sources[];
}

const keyOf = (pipeline: string | undefined, output: string): string => `${pipeline ?? "main"}\n${output}`;

export class TextParts {
  private pending = new Map<string, Pending>();

  /** A new run: whatever an earlier run left unfinished is forgotten. */
  reset(): void {
    this.pending.clear();
  }

  /** The events to hand on for `event`: none while a text's parts are still coming, the
   * whole text's event once its last part is in, the event itself otherwise. */
  accept(event: RunEvent): RunEvent[] {
    if (event.type === "text_part") return this.part(event);
    if ((event.type === "jaxpr" || event.type === "stablehlo" || event.type === "hlo") && event.parts) {
      const shown = event.shown_chars ?? event.text.length;
      this.pending.set(keyOf(event.pipeline, event.type), {
        event,
        texts: [event.text.slice(0, shown)],
        sources: [event.sources ?? []],
      });
      return [];
    }
    // a run that ends before every part came (its time ran out while it sent them):
    // what did come is shown, and says it is not all
    if (event.type === "done") return [...this.flush(), event];
    return [event];
  }

  private part(part: PartEvent): RunEvent[] {
    const key = keyOf(part.pipeline, part.output);
    const pending = this.pending.get(key);
    // the server's event gate passes parts only in order after their announcing event:
    // a stray one has nothing to join
    if (!pending || part.part !== pending.texts.length) return [];
    pending.texts.push(part.text);
    pending.sources.push(part.sources ?? []);
    if (pending.texts.length <= (pending.event.parts ?? 0)) return [];
    this.pending.delete(key);
    return [this.joined(pending, "")];
  }

  private flush(): RunEvent[] {
    const out = [...this.pending.values()].map((p) =>
      this.joined(p, `\n… the run ended after ${p.texts.length - 1} of ${p.event.parts} parts of this text`),
    );
    this.pending.clear();
    return out;
  }

  private joined(p: Pending, note: string): IrEvent {
    const sources = ([] as Sources).concat(...p.sources);
    return { ...p.event, text: p.texts.join("") + note, sources, parts: null, shown_chars: null };
  }
}
