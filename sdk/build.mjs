// Builds sdk/dist: loader.js (small, every page), recorder.js (rrweb, loaded lazily),
// survey.js (the survey widget, loaded lazily) and replayer.js (test support), then prints
// their sizes.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const entries = { loader: 'src/loader.js', recorder: 'src/recorder.js', survey: 'src/survey.js',
  replayer: 'src/replayer.js' };
const gzipped = {};

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
  gzipped[name] = gzipSync(code).length;
  console.log(`sdk/dist/${name}.js ${kb(code.length)} KiB, ${kb(gzipped[name])} KiB gzip`);
}
// The loader is on every page; the survey widget only where a survey may show (issue 20).
const kib = (n) => (n / 1024).toFixed(1);
console.log(`loader ${kib(gzipped.loader)} KiB gzip alone, `
  + `${kib(gzipped.loader + gzipped.survey)} KiB gzip with the survey widget`);
