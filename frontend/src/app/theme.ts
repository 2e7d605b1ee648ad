// The light and dark themes: the reader's choice kept in localStorage, else the
// system's preference.
const THEME_KEY = "jaxplay:theme";

export function installTheme(button: HTMLElement, root: HTMLElement = document.documentElement): void {
  const apply = (theme: string): void => {
    root.dataset.theme = theme;
    button.setAttribute("aria-label", theme === "dark" ? "Switch to the light theme" : "Switch to the dark theme");
  };
  apply(localStorage.getItem(THEME_KEY) ?? (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"));
  button.addEventListener("click", () => {
    const next = root.dataset.theme === "dark" ? "light" : "dark";
    apply(next);
    localStorage.setItem(THEME_KEY, next);
  });
}
