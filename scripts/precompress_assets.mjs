// Precompresses the built page's text files: <file>.br (brotli, best quality) and
// <file>.gz (gzip, level 9) beside each, which the server sends to a client that
// accepts that encoding (backend/app/web/assets.py) instead of compressing on the fly.
// Deterministic (gzip's header carries no time or name), so `build_frontend.sh
// --check` can compare a fresh build with the committed one byte for byte.
//
//   node scripts/precompress_assets.mjs frontend/dist
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const TEXT = /\.(js|mjs|css|svg|json|txt|map|xml|wasm)$/;
const MIN_BYTES = 1024;
const root = process.argv[2];
if (!root) {
  console.error("usage: node precompress_assets.mjs DIST");
  process.exit(2);
}

function* files(dir) {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else yield path;
  }
}

let raw = 0;
let br = 0;
for (const path of files(root)) {
  if (!TEXT.test(path)) continue;
  const data = readFileSync(path);
  if (data.length < MIN_BYTES) continue;
  const brotli = brotliCompressSync(data, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: data.length,
    },
  });
  const gzip = gzipSync(data, { level: 9 });
  // a variant no smaller than the file is not worth a second name
  if (brotli.length < data.length) writeFileSync(path + ".br", brotli);
  if (gzip.length < data.length) writeFileSync(path + ".gz", gzip);
  raw += data.length;
  br += Math.min(brotli.length, data.length);
  console.log(`precompress: ${relative(root, path)} ${data.length} -> br ${brotli.length}, gz ${gzip.length}`);
}
console.log(`precompress: ${raw} bytes of text -> ${br} as brotli`);
