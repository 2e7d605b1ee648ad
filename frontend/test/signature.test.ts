import { describe, expect, it } from "vitest";
import { argsFor, describeSignature, entrySignature, isArgCountError } from "../src/signature";

const args = (code: string, entry = "f") => {
  const sig = entrySignature(code, entry);
  return sig ? argsFor(sig) : null;
};

describe("args from the signature", () => {
  it("gives an array per parameter", () => {
    expect(args("def f(x): return jnp.sum(jnp.cos(x) ** 3)")).toBe("(jnp.array(1.0),)");
    expect(args("def f(w, x, y):\n    return w\n")).toBe("(jnp.array(1.0), jnp.array(1.0), jnp.array(1.0))");
    expect(args("def f():\n    return 1\n")).toBe("()");
  });

  it("uses numeric defaults as scalars and stops at other defaults", () => {
    expect(args("def f(x, n=3, eps=-1e-3, mode='a', k=2): pass")).toBe("(jnp.array(1.0), 3, -1e-3)");
  });

  it("reads shapes and dtypes from jaxtyping annotations, names kept consistent", () => {
    const code = 'def f(a: Float[Array, "n 2"], b: Int32[jax.Array, "n"], s: Float[Array, ""], t: float, u: jax.Array): pass';
    expect(args(code)).toBe("(jnp.ones((3, 2)), jnp.ones((3,), dtype=jnp.int32), jnp.ones(()), 1.0, jnp.array(1.0))");
    expect(args('def f(x: Float[Array, "*batch 3"]): pass')).toBe("(jnp.array(1.0),)");
  });

  it("leaves out *args, keyword-only and ** parameters", () => {
    expect(args("def f(x, y, *rest, z, **kw): pass")).toBe("(jnp.array(1.0), jnp.array(1.0))");
    expect(args("def f(x, /, y, *, z): pass")).toBe("(jnp.array(1.0), jnp.array(1.0))");
  });

  it("finds decorated functions and lambdas; the last definition wins", () => {
    expect(args("import jax\n@jax.jit\ndef f(a, b):\n    return a\n")).toBe("(jnp.array(1.0), jnp.array(1.0))");
    expect(args("g = lambda a, b=2: a", "g")).toBe("(jnp.array(1.0), 2)");
    expect(args("def f(a): pass\ndef f(a, b): pass\n")).toBe("(jnp.array(1.0), jnp.array(1.0))");
  });

  it("says nothing for names it cannot see: methods, dotted entries, other bindings", () => {
    expect(args("class C:\n    def f(self, x): pass\n")).toBeNull();
    expect(args("", "jax.nn.gelu")).toBeNull();
    expect(args("f = jax.jit(g)")).toBeNull();
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
