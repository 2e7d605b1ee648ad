import { defineConfig } from "vitest/config";

// The page is served by the backend (`jaxplay serve`) from frontend/dist, at `/` and
// at `/s/{id}`, so assets use absolute paths. `npm run dev` proxies the API to a
// running `jaxplay serve` (JAXPLAY_DEV_API, default http://127.0.0.1:8000).
declare const process: { env: Record<string, string | undefined> };
const api = process.env.JAXPLAY_DEV_API ?? "http://127.0.0.1:8000";

// Module preload hints: the entry's own (Vite's). The page's chunk (src/main.ts, with
// CodeMirror) is not preloaded by the HTML: boot.ts imports it once a shared link's run
// is on the wire (Vite's preload helper then fetches its chunks together), so the entry
// and the stylesheet are the first screen's only competition for the server and the
// renderer's main thread (benchmarks/page/page_delivery.py measured both ways).

export default defineConfig({
  base: "/",
  resolve: {
    // One copy of CodeMirror's state and view, or extensions stop matching.
    dedupe: ["@codemirror/state", "@codemirror/view", "@codemirror/language"],
  },
  // the Graph tab's layout worker (src/graph/worker.ts) as an ES module of this origin:
  // the CSP's worker-src 'self' allows it (no blob: URL, no eval)
  worker: { format: "es" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    reportCompressedSize: true,
    // the layout worker, with elkjs (loaded when the Graph tab opens), is one 1.5 MB chunk of its own
    chunkSizeWarningLimit: 1600,
  },
  server: {
    // the examples menu reads ../examples (src/model/examples.ts)
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
