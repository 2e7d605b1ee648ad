// src/'s folders keep docs/frontend.md's rule (which folder may import which), nothing
// is loose at src/'s root but the entry and the composition root, and no module name is
// used twice. The rule is read from the doc, so the doc and the check cannot differ.
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parseRule, repeatedStems, ruleBreaks, specifiers } from "./folder-rule";

const SRC = fileURLToPath(new URL("../src/", import.meta.url));
const DOC = readFileSync(new URL("../../docs/frontend.md", import.meta.url), "utf8");

function tree(): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = `${entry.parentPath}/${entry.name}`.slice(SRC.length).replace(/^\/+/, "");
    files.set(path, path.endsWith(".ts") ? readFileSync(SRC + path, "utf8") : "");
  }
  return files;
}

describe("src/'s folders", () => {
  const rule = parseRule(DOC);
  const files = tree();

  it("import only what docs/frontend.md's folder rule allows", () => {
    expect(files.size).toBeGreaterThan(100);
    expect(ruleBreaks(files, rule)).toEqual([]);
  });

  it("name each module once", () => {
    expect(repeatedStems(files.keys())).toEqual([]);
  });

  it("each have a row in the rule, and every row a folder", () => {
    const folders = new Set([...files.keys()].filter((p) => p.includes("/")).map((p) => p.slice(0, p.indexOf("/"))));
    const rows = [...rule.mayImport.keys()].filter((f) => f !== "(root)");
    expect(rows.sort()).toEqual([...folders].sort());
    expect([...rule.rootModules].sort()).toEqual(["boot.ts", "main.ts"]);
  });
});

describe("the check itself", () => {
  const rule = parseRule(DOC);
  const fake = (entries: Record<string, string>) => new Map(Object.entries(entries));

  it("reads every kind of import the page writes", () => {
    const text = [
      'import { a } from "./a";',
      'import type {\n  B,\n  C,\n} from "../b";',
      'export { d } from "./d";',
      'import "./style.css";',
      'const e = await import("../e");',
      'type F = typeof import("./f");',
      'new Worker(new URL("./worker.ts", import.meta.url));',
      'const s = "not from here";',
    ].join("\n");
    expect(specifiers(text)).toEqual(["./a", "../b", "./d", "./style.css", "../e", "./f", "./worker.ts"]);
  });

  it("says an import the rule forbids, a loose module, an unknown folder", () => {
    const broken = fake({
      "boot.ts": 'import "./main";',
      "main.ts": 'import { x } from "./app/x";',
      "app/x.ts": 'import { y } from "../model/y";',
      "model/y.ts": 'import { x } from "../app/x";\nimport data from "../hlo-ops.json";',
      "hlo-ops.json": "",
      "loose.ts": "",
      "misc/z.ts": "",
    });
    expect(ruleBreaks(broken, rule)).toEqual([
      "model/y.ts imports app/x.ts: model/ may not import app/",
      "loose.ts: loose at src/'s root (only boot.ts, main.ts may be)",
      "misc/z.ts: the folder misc/ has no row in docs/frontend.md's folder rule",
    ]);
  });

  it("says a module name used twice, and an import that names no file", () => {
    expect(repeatedStems(["model/checks.ts", "panes/checks.ts", "app/checks-bindings.ts", "i18n/en.json"])).toEqual(["model/checks.ts and panes/checks.ts"]);
    expect(() => ruleBreaks(fake({ "app/x.ts": 'import { y } from "./gone";' }), rule)).toThrow('app/x.ts: "./gone" names no file under src/');
  });

  it("refuses a rule it cannot read", () => {
    expect(() => parseRule("# no table here")).toThrow("no <!-- folder rule --> table");
    expect(() => parseRule("<!-- folder rule -->\n| folder | what | may import |\n| `app/` | the wiring | some |\n")).toThrow("`app/` may import what? some");
  });
});
