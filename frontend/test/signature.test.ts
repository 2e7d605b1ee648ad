import { describe, expect, it } from "vitest";
import { argsFor, describeSignature, entrySignature, followedEntry, isArgCountError, proposeArgs } from "../src/model/signature";

const args = (code: string, entry = "f") => {
  const sig = entrySignature(code, entry);
  return sig ? argsFor(sig) : null;
};

describe("args from the signature", () => {
  it("gives an array per parameter", () => {
    expect(args("def f(x): return jnp.sum(jnp.cos(x) ** 3)")).toBe("(jnp.ones((3,)),)");
    expect(args("def f(w, x, y):\n    return w\n")).toBe("(jnp.ones((3,)), jnp.ones((3,)), jnp.ones((3,)))");
    expect(args("def f():\n    return 1\n")).toBe("()");
  });

  it("uses numeric defaults as scalars and stops at other defaults", () => {
    expect(args("def f(x, n=3, eps=-1e-3, mode='a', k=2): pass")).toBe("(jnp.ones((3,)), 3, -1e-3)");
  });

  it("reads shapes and dtypes from jaxtyping annotations, names kept consistent", () => {
    const code = 'def f(a: Float[Array, "n 2"], b: Int32[jax.Array, "n"], s: Float[Array, ""], t: float, u: jax.Array): pass';
    expect(args(code)).toBe("(jnp.ones((3, 2)), jnp.ones((3,), dtype=jnp.int32), jnp.ones(()), 1.0, jnp.ones((3,)))");
    expect(args('def f(x: Float[Array, "*batch 3"]): pass')).toBe("(jnp.ones((3,)),)");
  });

  it("leaves out *args, keyword-only and ** parameters", () => {
    expect(args("def f(x, y, *rest, z, **kw): pass")).toBe("(jnp.ones((3,)), jnp.ones((3,)))");
    expect(args("def f(x, /, y, *, z): pass")).toBe("(jnp.ones((3,)), jnp.ones((3,)))");
  });

  it("finds decorated functions and lambdas; the last definition wins", () => {
    expect(args("import jax\n@jax.jit\ndef f(a, b):\n    return a\n")).toBe("(jnp.ones((3,)), jnp.ones((3,)))");
    expect(args("g = lambda a, b=2: a", "g")).toBe("(jnp.ones((3,)), 2)");
    expect(args("def f(a): pass\ndef f(a, b): pass\n")).toBe("(jnp.ones((3,)), jnp.ones((3,)))");
  });

  it("says nothing for names it cannot see: methods, dotted entries, other bindings", () => {
    expect(args("class C:\n    def f(self, x): pass\n")).toBeNull();
    expect(args("", "jax.nn.gelu")).toBeNull();
    expect(args("f = jax.jit(g)")).toBeNull();
  });

  it("never gives 0-d arrays to a matmul of two parameters", () => {
    expect(args("def f(x, w):\n    return jnp.sum(x @ w)\n")).toBe("(jnp.ones((3,)), jnp.ones((3,)))");
  });

  it("reads shapes from the docstring, asserts, unpacking and indexing", () => {
    const doc = 'def f(x: jax.Array, w):\n    """Loss.\n\n    x: array of shape (4, 3)\n    w (3, 2): the weights\n    """\n    return x @ w\n';
    expect(args(doc)).toBe("(jnp.ones((4, 3)), jnp.ones((3, 2)))");
    expect(args("def f(x):\n    assert x.shape == (2, 5)\n    return x\n")).toBe("(jnp.ones((2, 5)),)");
    expect(args("def f(x):\n    n, d = x.shape\n    return x\n")).toBe("(jnp.ones((3, 3)),)");
    expect(args("def f(x, w):\n    return x[:, 0] @ w\n")).toBe("(jnp.ones((3, 3)), jnp.ones((3,)))");
    expect(args("def f(x):\n    return x[..., 0]\n")).toBe("(jnp.ones((3,)),)"); // rank unknown: no guess
  });

  it("gives a scalar to a parameter Python branches on (JAX's sharp bit shows as such)", () => {
    expect(args("def f(x):\n    if x > 0:\n        return x\n    return -x\n")).toBe("(jnp.array(1.0),)");
    expect(args("def f(x, n):\n    while n:\n        n -= 1\n    return x\n")).toBe("(jnp.ones((3,)), jnp.array(1.0))");
    expect(args("def f(x):\n    if x.shape[0] > 2:\n        return x\n    return x\n")).toBe("(jnp.ones((3,)),)");
    expect(args("def f(x):\n    if len(x) > 2:\n        return x\n    return x\n")).toBe("(jnp.ones((3,)),)");
  });

  it("gives a dict for string keys and a tuple for an unpacking", () => {
    expect(args('def loss(params, x):\n    return jnp.sum(x @ params["w"] + params["b"])\n', "loss")).toBe('({"w": jnp.ones((3,)), "b": jnp.ones((3,))}, jnp.ones((3,)))');
    expect(args("def f(p, x):\n    w, b = p\n    return x @ w + b\n")).toBe("((jnp.ones((3,)), jnp.ones((3,))), jnp.ones((3,)))");
  });

  it("says where each argument came from", () => {
    const sig = entrySignature('def f(x: Float[Array, "2"], w, n=2):\n    assert w.shape == (2, 2)\n    return x\n', "f")!;
    expect(proposeArgs(sig)).toEqual({
      text: "(jnp.ones((2,)), jnp.ones((2, 2)), 2)",
      sources: [
        { name: "x", why: "its annotation" },
        { name: "w", why: "`w.shape == (2, 2)`" },
        { name: "n", why: "its default" },
      ],
    });
  });

  it("follows the entry to the function the user wrote", () => {
    const code = "def helper(x):\n    return x\n\ndef loss(w, x):\n    return helper(x @ w)\n";
    expect(followedEntry(code, "f", null)).toBe("loss"); // the last top-level def
    expect(followedEntry(code, "f", 5)).toBe("helper"); // the one under the cursor
    expect(followedEntry(code, "loss", 5)).toBeNull(); // it names one: kept
    expect(followedEntry(code, "jax.nn.gelu", null)).toBeNull(); // dotted: not the code's
    expect(followedEntry("def g(x): return x\nf = jax.jit(g)\n", "f", null)).toBeNull(); // bound another way
    expect(followedEntry("x = 1\n", "f", null)).toBeNull(); // no function to follow
    expect(followedEntry("g = lambda a: a\n", "f", null)).toBe("g");
  });

  it("describes the signature for messages", () => {
    expect(describeSignature(entrySignature("def f(x, n=3): pass", "f")!)).toBe("f(x, n=3)");
  });

  it("recognises Python's argument-count TypeErrors", () => {
    expect(isArgCountError("TypeError", "f() takes 1 positional argument but 3 were given")).toBe(true);
    expect(isArgCountError("TypeError", "f() missing 2 required positional arguments: 'x' and 'y'")).toBe(true);
    expect(isArgCountError("TypeError", "unsupported operand type(s) for +")).toBe(false);
    expect(isArgCountError("ValueError", "f() takes 1 positional argument but 3 were given")).toBe(false);
  });
});
