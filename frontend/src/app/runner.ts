// Run (the button, Ctrl+Enter, an example picked): the state made a request and sent
// (app/run.ts), or run on the ticked versions in across mode (app/across-controller.ts); a request
// that cannot be made says why in Errors instead.
import type { ArgsFollower } from "../controls/args";
import { toRequest } from "../model/state";
import type { StepProblem } from "../model/transforms";
import type { AcrossController } from "./across-controller";
import type { OutputsController } from "./outputs";
import type { RunController } from "./run";
import type { PlayStore } from "./store";

/** What Run needs of the other controllers (fakes in tests). */
export interface RunnerDeps {
  store: Pick<PlayStore, "state" | "changed">;
  follower: Pick<ArgsFollower, "follow">;
  outputs: Pick<OutputsController, "showProblems" | "label" | "clearErrors">;
  across: Pick<AcrossController, "on" | "setMode" | "run">;
  runs: Pick<RunController, "send">;
}

export class Runner {
  constructor(private readonly d: RunnerDeps) {}

  /** `timeoutS`: the wall-clock limit from this run on (a run again after a timeout):
   * kept in the state, so the next runs and a link made now have it too; the state's
   * (or the server's default) otherwise. */
  async run(timeoutS?: number): Promise<void> {
    const { store, outputs, across } = this.d;
    this.d.follower.follow(); // the args follow the code typed just before
    if (timeoutS !== undefined && timeoutS !== store.state.timeoutS) {
      store.state.timeoutS = timeoutS;
      store.changed();
    }
    const problems: StepProblem[] = [];
    const request = toRequest(store.state, problems);
    if (problems.length > 0) {
      outputs.showProblems(problems);
      across.setMode(false); // the problems are shown in the outputs
      return;
    }
    if (across.on) {
      this.d.outputs.clearErrors();
      void across.run(request);
      return;
    }
    outputs.label(store.state, request);
    await this.d.runs.send(request);
  }
}
