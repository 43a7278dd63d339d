// Builds static/dist: app.js (the dashboard, one ES module bundle with rrweb-player) and
// app.css (our styles plus the player's), then prints their sizes.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

await build({
  entryPoints: { app: 'src/main.js' },
  outdir: '../static/dist',
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  legalComments: 'none',
  logLevel: 'warning',
});
for (const name of ['app.js', 'app.css']) {
  const code = readFileSync(`../static/dist/${name}`);
  const kb = (n) => (n / 1024).toFixed(1).padStart(6);
  console.log(`static/dist/${name} ${kb(code.length)} KiB, ${kb(gzipSync(code).length)} KiB gzip`);
}
