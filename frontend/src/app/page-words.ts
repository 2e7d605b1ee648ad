// The page's own words in its language: the top bar's controls, the call row, the
// output groups and tabs, written into the elements app/layout.ts built (in English) from
// the catalogue of the language picked; and the language switch in the top bar. Only
// text is written (textContent, attributes), never HTML.
import { h } from "../util/dom";
import type { Layout } from "./layout";
import { GROUP_TITLES, GROUPS, TABS, type GroupId, type TabId } from "../model/tabtable";
import { LANGS, lang, onLang, setLang, t, type Key, type Lang } from "../i18n/index";

/** The first text node of `el` (a label's words before its control) set to `text`. */
function setOwnText(el: Element | null, text: string, atEnd = false): void {
  if (!el) return;
  const nodes = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE);
  const node = atEnd ? nodes[nodes.length - 1] : nodes[0];
  if (node) node.textContent = text;
  else el.prepend(text);
}

/** Writes the page's words in the current language into `ui`. */
export function translatePage(ui: Layout): void {
  ui.runBtn.textContent = t("button.run");
  ui.cancelBtn.textContent = t("button.cancel");
  ui.shareBtn.textContent = t("button.share");
  ui.compareBtn.textContent = t("button.compare");
  ui.acrossBtn.textContent = t("button.across");
  ui.shareBtn.title = t("button.share.title");
  ui.compareBtn.title = t("button.compare.title");
  ui.acrossBtn.title = t("button.across.title");
  for (const title of document.querySelectorAll(".pipeline-title")) setOwnText(title, `${t("label.pipeline")} `);
  setOwnText(ui.examples.options[0] ?? null, t("menu.examples"));
  setOwnText(ui.presets.options[0] ?? null, t("menu.presets"));
  setOwnText(ui.backend.closest("label"), `${t("label.backend")} `);
  setOwnText(ui.devices.closest("label"), `${t("label.devices")} `);
  setOwnText(ui.jaxVersion.closest("label"), `${t("label.jax")} `);
  setOwnText(ui.topbar.querySelector("details.config > summary"), t("label.config"));
  setOwnText(document.querySelector('label[for="entry"]'), t("label.entry"));
  setOwnText(document.querySelector('label[for="args"]'), t("label.args"));
  setOwnText(ui.bands.closest("label"), t("label.bands"), true);
  setOwnText(ui.meshHolder.querySelector("summary"), t("label.sharding"));
  for (const g of GROUPS) {
    const button = ui.groupButtons[g.id];
    const title = groupTitle(g.id);
    button.setAttribute("aria-label", title);
    button.title = `${title}: ${g.tabs.map(tabTitle).join(", ")}`;
    setOwnText(button.querySelector(".full"), title);
    setOwnText(button.querySelector(".short"), t(`group.${g.id}.short` as Key));
  }
  for (const tab of TABS) setOwnText(ui.tabs[tab.id], tabTitle(tab.id));
  document.documentElement.lang = lang() === "zh" ? "zh-Hans" : "en";
}

/** A tab's title in the page's language (the tab table's in English). */
export function tabTitle(id: TabId): string {
  return t(`tab.${id}` as Key);
}

function groupTitle(id: GroupId): string {
  return lang() === "en" ? GROUP_TITLES[id].title : t(`group.${id}` as Key);
}

/** The language switch (a select in the top bar, before Run) and the page's words
 * in the language picked; `storage` keeps the pick. */
export function installLanguage(ui: Layout, storage: Storage | null): HTMLSelectElement {
  const select = h(
    "select",
    { id: "language", "data-testid": "language", "aria-label": `${t("lang.label", {}, "en")} / ${t("lang.label", {}, "zh")}` },
    ...LANGS.map((l) => h("option", { value: l, lang: l === "zh" ? "zh-Hans" : "en" }, t("lang.name", {}, l))),
  );
  select.value = lang();
  select.addEventListener("change", () => setLang(select.value as Lang, storage));
  // beside the title, not among the run's controls: one more control there wrapped
  // the Run button under the "What to compute" popover at 1440 px
  (ui.topbar.querySelector("h1") ?? ui.themeBtn).after(select);
  onLang(() => {
    select.value = lang();
    translatePage(ui);
  });
  translatePage(ui);
  return select;
}
