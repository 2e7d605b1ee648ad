// The output panes the first screen does not show, in one chunk of their own: loaded
// when the page is idle after it was built, or when one of them is first needed
// (app/panes.ts, each behind a LazyPane: panes/lazy.ts). The jaxpr, StableHLO and HLO
// panes, Errors, Autodiff and Checks stay in the page's chunk.
export { ConsolePane } from "./console";
export { CostPane } from "./cost";
export { ExportPane } from "./export";
export { KernelsPane } from "./kernels";
export { MemoryPane } from "./memory";
export { ProfilePane } from "./profile";
export { RecompilesPane } from "./recompiles";
export { TimingPane } from "./timing";
export { ValuePane } from "./value";
