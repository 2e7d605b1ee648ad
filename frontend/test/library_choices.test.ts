// Picking another version of a library (a request's `libraries`, issue 22): the
// popover's view model with a backends response whose library lists alternatives,
// the picks kept or dropped when the JAX version changes, and the request and share
// link that carry the pick.
import { describe, expect, it } from "vitest";
import { acrossBody } from "../src/model/across-versions";
import { DEFAULT_STATE } from "../src/model/examples";
import { keptChoices, librariesView, versionsWithLibraries, withChoice } from "../src/model/libraries";
import { fromRequest, toRequest } from "../src/model/state";

// as GET /api/v1/backends lists them (backend/app/core/wire.py LibraryInfo)
const versions = versionsWithLibraries([
  {
    version: "0.12.0.1",
    default: true,
    libraries: [
      { name: "flax", version: "0.12.12", what: "neural networks", alternatives: [] },
      { name: "optax", version: "0.2.8", what: "optimizers", alternatives: ["0.2.6"] },
    ],
  },
  { version: "0.10.2", libraries: [{ name: "optax", version: "0.2.5", what: "optimizers" }] },
]);

describe("the libraries popover's picks", () => {
  it("lists a library's alternatives, the pick marked", () => {
    const view = librariesView(versions, "", null, { optax: "0.2.6" });
    const optax = view.rows.find((r) => r.name === "optax")!;
    expect(optax).toMatchObject({ version: "0.2.8", alternatives: ["0.2.6"], chosen: "0.2.6" });
    expect(view.rows.find((r) => r.name === "flax")).toMatchObject({ alternatives: [], chosen: "" });
    // a pick the version does not offer is no pick
    expect(librariesView(versions, "", null, { optax: "0.1.0" }).rows[1]!.chosen).toBe("");
  });

  it("compares the worker's version with the one picked", () => {
    const worker = { jaxVersion: "0.12.0.1", libraries: { flax: "0.12.12", optax: "0.2.6" } };
    expect(librariesView(versions, "", worker, { optax: "0.2.6" }).rows[1]!.workerVersion).toBe("");
    expect(librariesView(versions, "", worker).rows[1]!.workerVersion).toBe("0.2.6");
  });

  it("keeps only the picks the selected JAX version offers", () => {
    expect(keptChoices(versions, "", { optax: "0.2.6" })).toEqual({ optax: "0.2.6" });
    expect(keptChoices(versions, "0.12.0.1", { optax: "0.2.6", flax: "0.11.0" })).toEqual({ optax: "0.2.6" });
    expect(keptChoices(versions, "0.10.2", { optax: "0.2.6" })).toEqual({});
    expect(keptChoices([], "0.10.2", { optax: "0.2.6" })).toEqual({ optax: "0.2.6" }); // not known yet
    expect(withChoice({ optax: "0.2.6" }, "optax", "")).toEqual({});
    expect(withChoice({}, "optax", "0.2.6")).toEqual({ optax: "0.2.6" });
  });
});

describe("a run's libraries", () => {
  it("are sent when picked, kept in a shared snippet, and absent for the defaults", () => {
    expect(toRequest(DEFAULT_STATE)).not.toHaveProperty("libraries");
    expect(toRequest({ ...DEFAULT_STATE, libraries: {} })).not.toHaveProperty("libraries");
    const request = toRequest({ ...DEFAULT_STATE, libraries: { optax: "0.2.6" } });
    expect(request.libraries).toEqual({ optax: "0.2.6" });
    const stored = JSON.parse(JSON.stringify(request));
    expect(fromRequest(stored, DEFAULT_STATE).libraries).toEqual({ optax: "0.2.6" });
    expect(fromRequest({ code: "x = 1\n" }, DEFAULT_STATE).libraries).toEqual({});
    expect(fromRequest({ code: "", libraries: { optax: 2 } }, DEFAULT_STATE).libraries).toEqual({});
  });

  it("are left out of an across-versions comparison: each version runs its own set", () => {
    const request = toRequest({ ...DEFAULT_STATE, jaxVersion: "0.12.0.1", libraries: { optax: "0.2.6" } });
    const made = acrossBody(request, ["0.10.2", "0.12.0.1"]);
    if (!("body" in made)) throw new Error(made.problem);
    expect(made.body.request).not.toHaveProperty("libraries");
    expect(made.body.request).not.toHaveProperty("jax_version");
    expect(made.body.request.code).toBe(request.code);
  });
});
