import { describe, expect, it } from "vitest";
import { timeoutText } from "../../src/app/timeout-text";

const REASON = "wall clock 20 s, reached in the compile stage (stages done: exec 0.9 s, trace 4.8 s)";

describe("timeoutText", () => {
  it("keeps the stage and how far the run got, and leaves out the REST field where the page offers more time", () => {
    const text = timeoutText(`${REASON}; a longer timeout_s may let it finish: this server allows up to 60 s`, true);
    expect(text).toBe(`${REASON}.`);
    expect(text).not.toContain("timeout_s");
  });

  it("says the reason whole when no longer run is offered", () => {
    const longest = `${REASON.replace("20 s", "60 s")}; 60 s is this server's longest limit (JAXPLAY_MAX_TIMEOUT_S): the program needs less work to finish here`;
    expect(timeoutText(longest, false)).toBe(longest);
    expect(timeoutText("the worker was killed by SIGKILL", true)).toBe("the worker was killed by SIGKILL");
  });
});
