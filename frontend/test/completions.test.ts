import { describe, expect, it } from "vitest";
import { completionsAt, indexedVersions, loadIndex, moduleAliases, type CompletionIndex } from "../src/editor/completions";
import { DEFAULT_COMPLETIONS } from "../src/generated/completions/default";

const INDEX: CompletionIndex = {
  jax: "0.0.0",
  modules: {
    "jax.numpy": { sum: ["f", "(a, axis=None)", "Sum of array elements."], linalg: ["m", "", ""] },
    "jax.numpy.linalg": { norm: ["f", "(x, ord=None)", "Compute the norm."] },
    "flax.nnx": { Linear: ["c", "(in_features, out_features)", "A linear layer."] },
    optax: { adam: ["f", "(learning_rate)", "The Adam optimizer."] },
  },
};

describe("completion of JAX's names", () => {
  it("knows the pre-imports and the code's own imports", () => {
    const aliases = moduleAliases("import optax as ox\nfrom flax import nnx\nimport jax.numpy as np2, equinox\n");
    expect(aliases.get("jnp")).toBe("jax.numpy");
    expect(aliases.get("lax")).toBe("jax.lax");
    expect(aliases.get("ox")).toBe("optax");
    expect(aliases.get("nnx")).toBe("flax.nnx");
    expect(aliases.get("np2")).toBe("jax.numpy");
    expect(aliases.get("equinox")).toBe("equinox");
  });

  it("offers the members of the module before the dot, with signature and doc", () => {
    const aliases = moduleAliases("from flax import nnx\nimport optax as ox\n");
    const at = (before: string) => completionsAt(INDEX, aliases, before);
    const sum = at("    y = jnp.su")!;
    expect(sum.from).toBe("    y = jnp.".length);
    expect(sum.options.find((o) => o.label === "sum")).toEqual({ label: "sum", type: "function", detail: "(a, axis=None)", info: "Sum of array elements." });
    expect(at("jax.numpy.linalg.")!.options.map((o) => o.label)).toEqual(["norm"]);
    expect(at("jnp.linalg.n")!.options.map((o) => o.label)).toEqual(["norm"]);
    expect(at("nnx.L")!.options[0]!.type).toBe("class");
    expect(at("opt = ox.")!.options.map((o) => o.label)).toEqual(["adam"]);
    expect(at("x.su")).toBeNull(); // not a module of the index
    expect(at("jnp")).toBeNull(); // no dot: Python's own completion
    expect(at("f(x).jnp.")).toBeNull(); // an attribute of a value, not the module
  });

  it("loads the index of the version asked for, or the default's", async () => {
    expect(indexedVersions()).toContain(DEFAULT_COMPLETIONS);
    const index = (await loadIndex(""))!;
    expect(index.jax).toBe(DEFAULT_COMPLETIONS);
    expect(await loadIndex("0.0.1-none")).toBe(index);
    const [kind, signature, doc] = index.modules["jax.numpy"]!["sum"]!;
    expect(kind).toBe("f");
    expect(signature).toMatch(/^\(a/);
    expect(doc).toMatch(/sum/i);
    expect(Object.keys(index.modules)).toEqual(expect.arrayContaining(["jax", "jax.lax", "jax.nn", "jax.random", "flax.nnx", "optax", "equinox"]));
  });
});
