import { describe, expect, it } from "vitest";
import { GROUPS, TABS } from "../src/model/tabtable";
import { CATALOGUES, fromBrowser, initialLang, LANGS, localHint, t } from "../src/i18n";

const keys = (lang: "en" | "zh"): string[] => Object.keys(CATALOGUES[lang]).filter((k) => k !== "$comment").sort();
const placeholders = (s: string): string[] => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!).sort();
const codeOf = (s: string): string[] => [...s.matchAll(/`([^`]+)`/g)].map((m) => m[1]!).sort();

describe("the page's words (i18n/en.json, i18n/zh.json)", () => {
  it("has every key in both languages, none empty", () => {
    expect(keys("zh")).toEqual(keys("en"));
    for (const lang of LANGS) for (const k of keys(lang)) expect(CATALOGUES[lang][k]!.trim(), `${lang} ${k}`).not.toBe("");
  });

  it("fills the same placeholders and keeps the code of each text", () => {
    for (const k of keys("en")) {
      expect(placeholders(CATALOGUES.zh[k]!), k).toEqual(placeholders(CATALOGUES.en[k]!));
      expect(codeOf(CATALOGUES.zh[k]!), k).toEqual(codeOf(CATALOGUES.en[k]!));
    }
  });

  it("names every tab and group of the tab table", () => {
    for (const tab of TABS) expect(keys("en"), tab.id).toContain(`tab.${tab.id}`);
    for (const g of GROUPS) {
      expect(keys("en")).toContain(`group.${g.id}`);
      expect(keys("en")).toContain(`group.${g.id}.short`);
    }
    // the IR's names are never translated
    for (const id of ["jaxpr", "stablehlo", "hlo"] as const) expect(CATALOGUES.zh[`tab.${id}`]).toBe(CATALOGUES.en[`tab.${id}`]);
  });

  it("picks the browser's language until the reader picks one", () => {
    expect(fromBrowser(["zh-CN", "en"])).toBe("zh");
    expect(fromBrowser(["zh-TW"])).toBe("zh");
    expect(fromBrowser(["fr-FR", "en-US", "zh"])).toBe("en");
    expect(fromBrowser(["de"])).toBe("en");
    expect(fromBrowser([])).toBe("en");
    expect(initialLang({ getItem: () => "zh" }, ["en-US"])).toBe("zh");
    expect(initialLang({ getItem: () => "klingon" }, ["zh-CN"])).toBe("zh");
    expect(initialLang({ getItem: () => { throw new Error("denied"); } }, ["en"])).toBe("en");
    expect(initialLang(null, ["zh-Hans-CN"])).toBe("zh");
  });

  it("fills placeholders, and shows the engine's sharp-bit hints in the page's language", () => {
    expect(t("tour.step", { n: 3, total: 15 }, "en")).toBe("Step 3 of 15");
    expect(t("tour.step", { n: 3, total: 15 }, "zh")).toBe("第 3 步，共 15 步");
    const hint = CATALOGUES.en["hint.TracerBoolConversionError"]!;
    expect(localHint(hint, "en")).toBe(hint);
    expect(localHint(hint, "zh")).toBe(CATALOGUES.zh["hint.TracerBoolConversionError"]);
    expect(localHint("a hint the catalogue does not hold", "zh")).toBe("a hint the catalogue does not hold");
  });
});
