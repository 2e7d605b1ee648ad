// The one table of the output tabs: their order, their title, the group each belongs
// to (as users think of them: the IR, the values, how JAX did it, what it costs, the
// errors) and whether a run opens it by itself when its first output arrives.
// app/layout.ts builds the tab bar and the phone's group switcher from it, app/tabs.ts
// selects; the groups and their members are read from here and nowhere else.
export const TABS = [
  { id: "jaxpr", title: "jaxpr", group: "ir", opensItself: true },
  { id: "stablehlo", title: "StableHLO", group: "ir", opensItself: true },
  { id: "hlo", title: "HLO", group: "ir", opensItself: true },
  { id: "asm", title: "Asm", group: "ir", opensItself: false },
  { id: "graph", title: "Graph", group: "ir", opensItself: false },
  { id: "value", title: "Value", group: "values", opensItself: true },
  { id: "trace_values", title: "Stepper", group: "values", opensItself: false },
  { id: "numerics", title: "Numerics", group: "values", opensItself: false },
  { id: "checks", title: "Checks", group: "values", opensItself: true },
  { id: "console", title: "Console", group: "values", opensItself: false },
  { id: "autodiff", title: "Autodiff", group: "how", opensItself: false },
  { id: "sharding", title: "Sharding", group: "how", opensItself: false },
  { id: "passes", title: "Passes", group: "how", opensItself: false },
  { id: "kernels", title: "Kernels", group: "how", opensItself: false },
  { id: "remarks", title: "Remarks", group: "how", opensItself: false },
  { id: "recompiles", title: "Recompiles", group: "how", opensItself: false },
  { id: "export", title: "Export", group: "how", opensItself: false },
  { id: "cost", title: "Cost", group: "cost", opensItself: true },
  { id: "timing", title: "Timing", group: "cost", opensItself: true },
  { id: "memory", title: "Memory", group: "cost", opensItself: false },
  { id: "profile", title: "Profile", group: "cost", opensItself: false },
  { id: "errors", title: "Errors", group: "errors", opensItself: false },
] as const;

export type TabId = (typeof TABS)[number]["id"];
export type GroupId = (typeof TABS)[number]["group"];

/** Each group's name: in full above its tabs, short on the phone's group switcher. */
export const GROUP_TITLES: Record<GroupId, { title: string; short: string }> = {
  ir: { title: "IR", short: "IR" },
  values: { title: "Values", short: "Values" },
  how: { title: "How JAX did it", short: "How" },
  cost: { title: "Cost", short: "Cost" },
  errors: { title: "Errors", short: "Errors" },
};

/** The groups in the order of their first tab, each with its tabs in the table's order. */
export const GROUPS: readonly { id: GroupId; tabs: TabId[] }[] = TABS.reduce<{ id: GroupId; tabs: TabId[] }[]>((groups, t) => {
  const last = groups[groups.length - 1];
  if (last?.id === t.group) last.tabs.push(t.id);
  else if (groups.some((g) => g.id === t.group)) throw new Error(`tabtable: group ${t.group} is split`);
  else groups.push({ id: t.group, tabs: [t.id] });
  return groups;
}, []);

/** The group `id` belongs to. */
export function groupOf(id: TabId): GroupId {
  return TABS.find((t) => t.id === id)!.group;
}

/** The tabs a run may open by itself when their first output arrives. */
export const OPENS_ITSELF: readonly TabId[] = TABS.filter((t) => t.opensItself).map((t) => t.id);

/** The tab a link's address names (`#out=stablehlo`), or null. */
export function tabFromHash(hash: string): TabId | null {
  const m = /(?:^#|&)out=([a-z_]+)/.exec(hash);
  const id = m?.[1];
  return TABS.find((t) => t.id === id)?.id ?? null;
}

/** The address's fragment for tab `id`. */
export function hashFor(id: TabId): string {
  return `#out=${id}`;
}
