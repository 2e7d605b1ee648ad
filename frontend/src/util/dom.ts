// A tiny element builder. Text always goes in as text nodes, never as HTML: output
// from user code and from JAX is untrusted and must render as what it says.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value as EventListener);
    } else if (key === "class") {
      el.className = String(value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: (Child | Child[])[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  append(el, children);
  return el;
}

function append(el: Element, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el: Element): void {
  el.replaceChildren();
}

/** An https link to documentation, or plain text when the URL is anything else. */
export function docLink(url: string | null | undefined, label: string): Node {
  if (url && /^https:\/\/[^\s"'<>]+$/.test(url)) {
    return h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, label);
  }
  return document.createTextNode(url ?? "");
}

/** Plain text with `backticked` spans shown as code (as JAX's hints write them). */
export function withCode(text: string): Node[] {
  return text.split("`").map((part, i) => (i % 2 === 1 ? h("code", {}, part) : document.createTextNode(part)));
}
