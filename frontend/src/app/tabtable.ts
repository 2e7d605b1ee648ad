// The one table of the output tabs: their order, their title, the group each belongs
// to (drawn as one cluster in the tab bar) and whether a run opens it by itself when
// its first output arrives. layout.ts builds the tab bar from it, app/tabs.ts selects.
export const TABS = [
  { id: "jaxpr", title: "jaxpr", group: "IR", opensItself: true },
  { id: "stablehlo", title: "StableHLO", group: "IR", opensItself: true },
  { id: "hlo", title: "HLO", group: "IR", opensItself: true },
  { id: "graph", title: "Graph", group: "IR", opensItself: false },
  { id: "autodiff", title: "Autodiff", group: "IR", opensItself: false },
  { id: "value", title: "Value", group: "values", opensItself: true },
  { id: "console", title: "Console", group: "values", opensItself: false },
  { id: "trace_values", title: "Stepper", group: "values", opensItself: false },
  { id: "checks", title: "Checks", group: "values", opensItself: true },
  { id: "cost", title: "Cost", group: "XLA", opensItself: true },
  { id: "timing", title: "Timing", group: "XLA", opensItself: true },
  { id: "passes", title: "Passes", group: "XLA", opensItself: false },
  { id: "asm", title: "Asm", group: "XLA", opensItself: false },
  { id: "memory", title: "Memory", group: "XLA", opensItself: false },
  { id: "remarks", title: "Remarks", group: "XLA", opensItself: false },
  { id: "kernels", title: "Kernels", group: "XLA", opensItself: false },
  { id: "profile", title: "Profile", group: "XLA", opensItself: false },
  { id: "sharding", title: "Sharding", group: "sharding", opensItself: false },
  { id: "errors", title: "Errors", group: "errors", opensItself: false },
] as const;

export type TabId = (typeof TABS)[number]["id"];

/** Whether `tab` is the first of its group in the bar (where the group's label goes). */
export function startsGroup(index: number): boolean {
  return index === 0 || TABS[index]!.group !== TABS[index - 1]!.group;
}

/** The tabs a run may open by itself when their first output arrives. */
export const OPENS_ITSELF: readonly TabId[] = TABS.filter((t) => t.opensItself).map((t) => t.id);
