// Across versions: Run runs the request on the ticked versions (POST /api/v1/across)
// and shows where each output changed. The view (panes/across.ts) and the request's
// rules (model/across-versions.ts) are loaded on first use: a chunk of their own.
import type { RunBody } from "../generated/request";
import { linkQuery } from "../connection/connection";
import { ApiError } from "../connection/protocol";
import type { AcrossView } from "../panes/across";

type AcrossModule = typeof import("../model/across-versions");
export type VersionInfo = { version: string; installed: boolean; default: boolean };

/** What the controller needs of the across view (panes/across.ts; a fake in tests). */
export type AcrossViewLike = Pick<AcrossView, "setVersions" | "ticked" | "setStatus" | "clearResult" | "show">;

export interface AcrossHooks {
  /** loads the view and the rules (dynamic imports) */
  load: () => Promise<{ view: AcrossViewLike; mod: AcrossModule }>;
  /** the versions ticked last (the state's) */
  ticked: () => string[] | undefined;
  /** across mode turned on or off */
  onMode: (on: boolean) => void;
  /** a request on its way (true) or over (false) */
  onBusy: (busy: boolean) => void;
  fetch?: typeof fetch;
}

export class AcrossController {
  on = false;
  private versions: VersionInfo[] = [];
  /** the versions of the last comparison shown (a bug report's "first changed in") */
  lastVersions: string[] | null = null;
  private loading: Promise<{ view: AcrossViewLike; mod: AcrossModule }> | null = null;
  private abort: AbortController | null = null;

  constructor(private readonly hooks: AcrossHooks) {}

  /** Loads the view (once) with the versions offered. */
  load(): Promise<{ view: AcrossViewLike; mod: AcrossModule }> {
    this.loading ??= this.hooks.load().then((loaded) => {
      const choice = loaded.mod.acrossChoices(this.versions, this.hooks.ticked());
      loaded.view.setVersions(choice.offered, choice.ticked);
      return loaded;
    });
    return this.loading;
  }

  setMode(on: boolean): void {
    if (on) void this.load();
    this.on = on;
    this.hooks.onMode(on);
  }

  /** The versions the server offers (GET /api/v1/backends). */
  setVersions(versions: VersionInfo[]): void {
    this.versions = versions;
    if (!this.loading) return;
    void this.loading.then(({ view, mod }) => {
      const choice = mod.acrossChoices(versions, this.hooks.ticked());
      view.setVersions(choice.offered, choice.ticked);
    });
  }

  /** Stops waiting for the answer; false when none is awaited. */
  cancel(): boolean {
    if (!this.abort) return false;
    this.abort.abort();
    return true;
  }

  /** Runs `request` on the ticked versions and shows where each output changed. */
  async run(request: RunBody): Promise<void> {
    const { view, mod } = await this.load();
    const made = mod.acrossBody(request, view.ticked());
    if ("problem" in made) {
      view.setStatus("error", made.problem);
      return;
    }
    this.abort?.abort();
    const abort = new AbortController();
    this.abort = abort;
    view.clearResult();
    const n = made.body.versions.length;
    view.setStatus("running", `Running on ${n} versions, one after the other (a version's first run starts its workers)…`);
    this.hooks.onBusy(true);
    try {
      const r = await (this.hooks.fetch ?? fetch)(`/api/v1/across${linkQuery(globalThis.location ?? { pathname: "" })}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(made.body), signal: abort.signal });
      const body: unknown = await r.json();
      if (!r.ok) {
        const err = ApiError.safeParse(body);
        const message = err.success ? `${err.data.message}${err.data.field ? ` (field: ${err.data.field})` : ""}` : r.statusText;
        view.setStatus("error", `The server refused it (${r.status}): ${message}`);
        return;
      }
      const answer = mod.AcrossAnswer.safeParse(body);
      if (!answer.success) {
        view.setStatus("error", "The server's answer did not validate (see the console).");
        console.warn("jaxplay: across answer:", answer.error);
      } else {
        view.show(answer.data);
        this.lastVersions = made.body.versions;
      }
    } catch (e) {
      if (abort.signal.aborted) view.setStatus("cancelled", "Cancelled: the page stopped waiting (versions already started finish on the server).");
      else view.setStatus("error", `Cannot reach the server: ${(e as Error).message}`);
    } finally {
      if (this.abort === abort) {
        this.abort = null;
        this.hooks.onBusy(false);
      }
    }
  }
}
