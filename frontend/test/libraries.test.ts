// The import table against the curated set (sandbox/environments/libraries.py, read as text: its
// names and the modules each one's zygote imports), where an import goes in the code,
// and the popover's view model from a backends response's versions.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { IMPORTS, importInsertion, importLine, librariesView, versionsWithLibraries, withImport } from "../src/model/libraries";

const table = readFileSync(new URL("../../sandbox/environments/libraries.py", import.meta.url), "utf8");
/** name -> the modules of its Library(...) row */
const curated = new Map(
  [...table.matchAll(/Library\(\s*"([^"]+)",\s*\(([^)]*)\)/g)].map((m) => [m[1]!, [...m[2]!.matchAll(/"([^"]+)"/g)].map((x) => x[1]!)]),
);

describe("the import table", () => {
  it("names every library of the curated set, and no other", () => {
    expect(curated.size).toBeGreaterThan(10);
    expect(Object.keys(IMPORTS).sort()).toEqual([...curated.keys()].sort());
  });

  it("imports a package the library's row names", () => {
    for (const [name, modules] of curated) {
      const line = IMPORTS[name]!;
      const m = /^(?:import (\S+)(?: as \w+)?|from (\S+) import [\w, ]+)$/.exec(line);
      expect(m, line).not.toBeNull();
      const module = (m![1] ?? m![2])!;
      expect(modules.map((x) => x.split(".")[0]), `${name}: ${line}`).toContain(module.split(".")[0]);
    }
    expect(importLine("flax")).toBe("from flax import nnx");
    expect(importLine("equinox")).toBe("import equinox as eqx");
    expect(importLine("optax")).toBe("import optax");
    expect(importLine("some-new-lib")).toBe("import some_new_lib");
  });
});

describe("inserting an import", () => {
  it("goes at the top, once", () => {
    expect(withImport("import jax\n", "optax")).toBe("import optax\nimport jax\n");
    expect(withImport("import optax\nimport jax\n", "optax")).toBe("import optax\nimport jax\n");
    expect(withImport("", "optax")).toBe("import optax\n");
  });

  it("goes after comments, a docstring and __future__ imports", () => {
    const code = '#!/usr/bin/env python\n# a comment\n"""Doc\nstring."""\nfrom __future__ import annotations\nimport jax\n';
    expect(withImport(code, "equinox")).toBe(code.replace("import jax", "import equinox as eqx\nimport jax"));
    expect(withImport('"""one line."""\nx = 1', "chex")).toBe('"""one line."""\nimport chex\nx = 1');
    expect(withImport("# only a comment", "chex")).toBe("# only a comment\nimport chex\n");
    expect(withImport("# header\n\nimport jax\n", "optax")).toBe("# header\n\nimport optax\nimport jax\n");
    expect(withImport("# header\n\nx = 1\n", "optax")).toBe("# header\nimport optax\n\nx = 1\n");
  });

  it("never goes inside an unterminated docstring", () => {
    expect(importInsertion('"""open\nimport jax', "import optax")).toEqual({ at: 0, insert: "import optax\n" });
  });
});

// what GET /api/v1/backends says of each version (docs/api.md, "JAX versions")
const versions = versionsWithLibraries([
  {
    version: "0.4.38",
    installed: true,
    default: false,
    libraries: [{ name: "flax", version: "0.10.4", what: "neural networks: NNX and Linen" }, { name: "optax", version: "0.2.5" }],
    libraries_not_offered: [{ name: "penzai", reason: "penzai needs jax>=0.4.39" }],
  },
  { version: "0.5.3", installed: false, default: false, libraries: [] },
  {
    version: "0.10.0",
    installed: true,
    default: true,
    libraries: [
      { name: "flax", version: "0.12.1" },
      { name: "optax", version: "0.2.8", what: "gradient transformations and optimizers" },
      { name: "penzai", version: "0.2.5" },
    ],
  },
  { version: 7 }, // malformed: left out
]);

describe("the popover's view", () => {
  it("reads the versions that parse", () => {
    expect(versions.map((v) => v.version)).toEqual(["0.4.38", "0.5.3", "0.10.0"]);
  });

  it("lists the default version's libraries with versions, what and import", () => {
    const view = librariesView(versions, "");
    expect(view.title).toBe("jax 0.10.0 (default)");
    expect(view.rows.map((r) => [r.name, r.version, r.offered])).toEqual([
      ["flax", "0.12.1", true],
      ["optax", "0.2.8", true],
      ["penzai", "0.2.5", true],
    ]);
    expect(view.rows[0]!.what).toBe("neural networks: NNX and Linen");
    expect(view.rows[1]!.importLine).toBe("import optax");
    expect(view.note).toBe("");
  });

  it("greys what a version does not offer, with the API's reason or a plain one", () => {
    const old = librariesView(versions, "0.4.38");
    const penzai = old.rows.find((r) => r.name === "penzai")!;
    expect([penzai.offered, penzai.version, penzai.reason]).toEqual([false, "", "penzai needs jax>=0.4.39"]);
    const none = librariesView(versions, "0.5.3");
    expect(none.rows.every((r) => !r.offered)).toBe(true);
    expect(none.rows[0]!.reason).toBe("JAX 0.5.3 has no library lock: it offers none");
    const partial = versionsWithLibraries([{ version: "0.6.2", libraries: [{ name: "optax", version: "0.2.4" }] }, versions[2]]);
    expect(librariesView(partial, "0.6.2").rows.find((r) => r.name === "flax")!.reason).toBe("not in JAX 0.6.2's library lock");
  });

  it("says the worker's versions where they differ from the list", () => {
    const view = librariesView(versions, "", { jaxVersion: "0.10.0", libraries: { flax: "0.12.2", optax: "0.2.8" } });
    expect(view.rows.map((r) => r.workerVersion)).toEqual(["0.12.2", "", ""]);
    expect(view.note).toBe("The last run's worker had 1 at another version (marked); without penzai.");
    const same = librariesView(versions, "", { jaxVersion: "0.10.0", libraries: { flax: "0.12.1", optax: "0.2.8", penzai: "0.2.5" } });
    expect(same.note).toBe("The last run's worker had these versions.");
    const other = librariesView(versions, "0.4.38", { jaxVersion: "0.10.0", libraries: { flax: "0.12.2" } });
    expect(other.rows.every((r) => r.workerVersion === "")).toBe(true);
    expect(other.note).toBe("The last run ran JAX 0.10.0, not 0.4.38.");
  });

  it("says so for a version the server does not list, showing what the worker had", () => {
    expect(librariesView([], "").note).toBe("This server lists no libraries.");
    const view = librariesView(versions, "0.3.0", { jaxVersion: "0.3.0", libraries: { flax: "0.5.0" } });
    expect(view.rows.map((r) => [r.name, r.version])).toEqual([["flax", "0.5.0"]]);
    expect(view.note).toBe("The last run's worker (JAX 0.3.0) had these.");
  });
});
