// The page's language (issue 53): its own words from one catalogue per language
// (en.json, zh.json: the same keys, frontend/test/i18n.test.ts), picked from the
// browser's languages until the reader picks one on the switch (kept in localStorage).
// Code, JAX's names and IR are never translated; the engine's hints of the sharp-bit
// errors are shown in the page's language where the catalogue has them word for word.
import en from "./en.json";
import zh from "./zh.json";

export const LANGS = ["en", "zh"] as const;
export type Lang = (typeof LANGS)[number];
export type Key = Exclude<keyof typeof en, "$comment">;

export const CATALOGUES: Record<Lang, Record<string, string>> = { en, zh };

const KEY = "jaxplay:lang";

/** The language of the browser's list (`navigator.languages`): the first that is
 * English or Chinese (any zh: the catalogue is 简体中文), else English. */
export function fromBrowser(languages: readonly string[]): Lang {
  for (const tag of languages) {
    const base = tag.toLowerCase().split("-")[0];
    if (base === "zh") return "zh";
    if (base === "en") return "en";
  }
  return "en";
}

function isLang(value: unknown): value is Lang {
  return typeof value === "string" && (LANGS as readonly string[]).includes(value);
}

let current: Lang = "en";
const listeners: ((lang: Lang) => void)[] = [];

/** The reader's saved pick, else the browser's. */
export function initialLang(storage: Pick<Storage, "getItem"> | null, languages: readonly string[]): Lang {
  let saved: string | null = null;
  try {
    saved = storage?.getItem(KEY) ?? null;
  } catch {
    // storage refused (a private window): the browser's language
  }
  return isLang(saved) ? saved : fromBrowser(languages);
}

export function lang(): Lang {
  return current;
}

/** Sets the page's language (saved when `storage` is given) and tells the listeners. */
export function setLang(next: Lang, storage: Pick<Storage, "setItem"> | null = null): void {
  current = next;
  try {
    storage?.setItem(KEY, next);
  } catch {
    // not kept: the page still switches
  }
  for (const listener of listeners) listener(next);
}

export function onLang(listener: (lang: Lang) => void): void {
  listeners.push(listener);
}

/** `key` in the page's language (or `in`), `{name}`s filled from `vars`. */
export function t(key: Key, vars: Record<string, string | number> = {}, inLang: Lang = current): string {
  const text = CATALOGUES[inLang][key] ?? CATALOGUES.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (m, name: string) => (name in vars ? String(vars[name]) : m));
}

const HINT_KEYS = (Object.keys(en) as Key[]).filter((k) => k.startsWith("hint."));

/** The engine's hint (English, sandbox/engine/core/errors.py) in the page's language
 * when it is one the catalogue translates; otherwise as it came. */
export function localHint(hint: string, inLang: Lang = current): string {
  if (inLang === "en") return hint;
  const key = HINT_KEYS.find((k) => CATALOGUES.en[k] === hint);
  return key === undefined ? hint : t(key, {}, inLang);
}
