// The output panes, one per tab that shows run outputs, and the scheduler that feeds
// them (panes/render.ts). The Graph (elkjs layout), Passes (its diff: @codemirror/merge)
// and Sharding panes are loaded when their tab is first shown (panes/lazy.ts); the panes
// of panes/later.ts (value, cost, timing, console, memory, kernels, profile) when the
// page is idle, or when first fed.
import type { EditorView } from "@codemirror/view";
import { IR_TYPES, type IrType } from "../connection/protocol";
import { AsmPane } from "../panes/asm";
import { ChecksPane } from "../panes/checks";
import { AutodiffPane } from "../panes/autodiff";
import { ErrorsPane } from "../panes/errors";
import type { GraphPane } from "../panes/graph";
import { IrPane } from "../panes/ir";
import type { PassesPane } from "../panes/passes";
import { Progress } from "../panes/progress";
import { RemarksPane } from "../panes/remarks";
import type { CostBefore } from "../panes/cost";
import type { ShardingPane } from "../panes/sharding";
import { TraceValuesPane } from "../panes/trace_values";
import { NumericsPane } from "../panes/numerics";
import { LazyPane } from "../panes/lazy";
import { PaneScheduler, whenIdle, type ScheduledPane } from "../panes/render";
import type { TabId } from "../model/tabtable";

export interface PaneHooks {
  /** the pointer is on a line linked to `codeLine` (null: off every line) */
  hover: (codeLine: number | null, from: EditorView | null) => void;
  /** a click on a linked line */
  pin: (codeLine: number) => void;
  /** scrolls the editor to a code line */
  reveal: (codeLine: number) => void;
  /** the graph was drawn: the code lines it links are banded */
  drawn: () => void;
  /** the entry's parameter names (the sharding pane's rows) */
  params: () => string[];
  /** the tab on show */
  active: () => TabId;
  /** a pane rendered what it held back: its tab's badge follows */
  rendered: (entry: ScheduledPane) => void;
  /** the cost pane's figures before optimisation (the request's cost_before) */
  costBefore?: CostBefore;
  /** the program run again, its value's leaves from this one (the Value pane's pages) */
  valueFrom?: (first: number) => void;
}

export class Panes {
  readonly ir = {} as Record<IrType, IrPane>;
  readonly graph: LazyPane<GraphPane>;
  readonly passes: LazyPane<PassesPane>;
  readonly sharding: LazyPane<ShardingPane>;
  readonly errors: ErrorsPane;
  readonly autodiff: AutodiffPane;
  readonly numerics: NumericsPane;
  readonly progress: Progress;
  readonly scheduler: PaneScheduler;

  constructor(panels: Record<TabId, HTMLElement>, progress: HTMLElement, private readonly hooks: PaneHooks) {
    for (const kind of IR_TYPES) this.ir[kind] = new IrPane(kind, panels[kind], hooks.hover, hooks.pin);
    const hoverCode = (line: number | null): void => hooks.hover(line, null);
    this.graph = new LazyPane<GraphPane>(["jaxpr", "hlo"], async () => {
      const { GraphPane } = await import("../panes/graph");
      return new GraphPane(panels.graph, hoverCode, hooks.pin, hooks.drawn);
    });
    this.sharding = new LazyPane<ShardingPane>(["sharding"], async () => {
      const { ShardingPane } = await import("../panes/sharding");
      return new ShardingPane(panels.sharding, hooks.reveal, hooks.params);
    });
    this.passes = new LazyPane<PassesPane>(["passes", "profile"], async () => {
      const { PassesPane } = await import("../panes/passes");
      return new PassesPane(panels.passes, hooks.hover, hooks.pin);
    });
    this.errors = new ErrorsPane(panels.errors, hooks.reveal);
    this.autodiff = new AutodiffPane(panels.autodiff, hooks.hover, hooks.pin, hoverCode);
    this.numerics = new NumericsPane(panels.numerics, hooks.reveal, hoverCode);
    this.progress = new Progress(progress);
    const later = (): Promise<typeof import("../panes/later")> => import("../panes/later");
    const value = new LazyPane(["value"], async () => new (await later()).ValuePane(panels.value, hooks.valueFrom));
    whenIdle(() => void value.ready()); // the chunk of them all, before a run's end needs it
    /** every output pane with its tab; events go to the panes that consume them */
    const all: ScheduledPane[] = [
      ...IR_TYPES.map((k): ScheduledPane => ({ tab: k, pane: this.ir[k] })),
      { tab: "graph", pane: this.graph, lazy: true },
      { tab: "autodiff", pane: this.autodiff },
      { tab: "value", pane: value },
      { tab: "cost", pane: new LazyPane(["cost"], async () => new (await later()).CostPane(panels.cost, hooks.costBefore)) },
      { tab: "timing", pane: new LazyPane(["timing"], async () => new (await later()).TimingPane(panels.timing)) },
      { tab: "passes", pane: this.passes, lazy: true },
      { tab: "asm", pane: new AsmPane(panels.asm, hoverCode) },
      { tab: "memory", pane: new LazyPane(["memory"], async () => new (await later()).MemoryPane(panels.memory, hoverCode)) },
      { tab: "remarks", pane: new RemarksPane(panels.remarks, hooks.reveal) },
      { tab: "recompiles", pane: new LazyPane(["recompiles"], async () => new (await later()).RecompilesPane(panels.recompiles, hooks.reveal)) },
      { tab: "export", pane: new LazyPane(["export"], async () => new (await later()).ExportPane(panels.export)) },
      { tab: "kernels", pane: new LazyPane(["kernels"], async () => new (await later()).KernelsPane(panels.kernels, hooks.reveal, hoverCode)) },
      { tab: "profile", pane: new LazyPane(["profile"], async () => new (await later()).ProfilePane(panels.profile, hoverCode)) },
      { tab: "sharding", pane: this.sharding, lazy: true },
      { tab: "console", pane: new LazyPane(["stdout", "stderr"], async () => new (await later()).ConsolePane(panels.console)) },
      { tab: "checks", pane: new ChecksPane(panels.checks, hooks.reveal) },
      { tab: "trace_values", pane: new TraceValuesPane(panels.trace_values, hooks.reveal, hoverCode) },
      { tab: "numerics", pane: this.numerics },
    ];
    // a lazy pane that drew late (its chunk came after the scheduler's render, as on a
    // loaded machine) says so as a render does, or its lines would never be banded
    for (const entry of all) if (entry.pane instanceof LazyPane) entry.pane.onLoaded = () => hooks.rendered(entry);
    this.scheduler = new PaneScheduler(all, hooks.active, undefined, hooks.rendered);
  }

  /** The IR pane on show, if an IR tab is. */
  activeIr(): IrPane | null {
    const tab = this.hooks.active();
    return (IR_TYPES as readonly string[]).includes(tab) ? this.ir[tab as IrType] : null;
  }

  /** The text views whose lines link to the code: the IR pane's or the passes'. */
  linkedViews(): EditorView[] {
    if (this.hooks.active() === "autodiff") return this.autodiff.views();
    return this.hooks.active() === "passes" ? (this.passes.get()?.views() ?? []) : (this.activeIr()?.views() ?? []);
  }

  /** The code lines to band: the IR text on show (the Graph tab: the text it draws);
   * on another tab, the lines its pane links (Memory, Profile, Asm, Kernels...). */
  bandLines(): Set<number> {
    const tab = this.hooks.active();
    const ir = tab === "graph" ? this.ir[this.graph.get()?.source ?? "jaxpr"] : this.activeIr();
    if (ir) return ir.codeLines();
    const lines = new Set<number>();
    for (const entry of this.scheduler.entries(tab)) for (const l of entry.pane.codeLines?.() ?? []) lines.add(l);
    return lines;
  }
}
