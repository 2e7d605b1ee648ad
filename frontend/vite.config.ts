import type { Plugin } from "vite";
import { defineConfig } from "vitest/config";

// The page is served by the backend (`jaxplay serve`) from frontend/dist, at `/` and
// at `/s/{id}`, so assets use absolute paths. `npm run dev` proxies the API to a
// running `jaxplay serve` (JAXPLAY_DEV_API, default http://127.0.0.1:8000).
declare const process: { env: Record<string, string | undefined> };
const api = process.env.JAXPLAY_DEV_API ?? "http://127.0.0.1:8000";

/** The page's chunk (src/main.ts, which the small entry src/boot.ts imports once it has
 * opened the WebSocket) and the chunks it imports, preloaded by the HTML: fetched and
 * compiled while the entry runs, as if they were the entry's own. */
function preloadPage(): Plugin {
  return {
    name: "jaxplay-preload-page",
    apply: "build",
    transformIndexHtml: {
      order: "post",
      handler(html, ctx) {
        const bundle = ctx.bundle;
        if (!bundle) return html;
        const page = Object.values(bundle).find((c) => c.type === "chunk" && c.facadeModuleId?.endsWith("/src/main.ts"));
        if (!page || page.type !== "chunk") throw new Error("vite.config.ts: no chunk for src/main.ts");
        const files: string[] = [];
        const add = (file: string): void => {
          if (files.includes(file)) return;
          files.push(file);
          const chunk = bundle[file];
          if (chunk?.type === "chunk") chunk.imports.forEach(add);
        };
        add(page.fileName);
        return files
          .filter((f) => !html.includes(`/${f}"`))
          .map((f) => ({ tag: "link", attrs: { rel: "modulepreload", crossorigin: true, href: `/${f}` }, injectTo: "head" as const }));
      },
    },
  };
}

export default defineConfig({
  base: "/",
  plugins: [preloadPage()],
  resolve: {
    // One copy of CodeMirror's state and view, or extensions stop matching.
    dedupe: ["@codemirror/state", "@codemirror/view", "@codemirror/language"],
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    reportCompressedSize: true,
    // elkjs (the Graph tab's layout, loaded when the tab opens) is one 1.5 MB chunk of its own
    chunkSizeWarningLimit: 1600,
  },
  server: {
    // the examples menu reads ../examples (src/examples.ts)
    fs: { allow: [".."] },
    proxy: {
      "/api": { target: api, ws: true },
      "/s/": { target: api },
    },
  },
  test: {
    environment: "node",
    include: ["test/**/*.test.ts"],
  },
});
