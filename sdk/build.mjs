// Builds sdk/dist: loader.js (small, every page), recorder.js (rrweb, loaded lazily) and
// replayer.js (test support), then prints their sizes.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const entries = { loader: 'src/loader.js', recorder: 'src/recorder.js', replayer: 'src/replayer.js' };

for (const [name, entry] of Object.entries(entries)) {
  await build({
    entryPoints: [entry],
    outfile: `dist/${name}.js`,
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['es2020'],
    legalComments: 'none',
    logLevel: 'warning',
  });
  const code = readFileSync(`dist/${name}.js`);
  const kb = (n) => (n / 1024).toFixed(1).padStart(6);
  console.log(`sdk/dist/${name}.js ${kb(code.length)} KiB, ${kb(gzipSync(code).length)} KiB gzip`);
}
