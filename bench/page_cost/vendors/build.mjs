// dist/sentry.js: @sentry/browser's init and Replay, bundled and minified the way a shop's own
// bundler would (the npm package ships no ready browser bundle). posthog-js is served from
// node_modules/posthog-js/dist as it is published.
import { build } from 'esbuild';

await build({
  entryPoints: ['sentry-entry.js'],
  outfile: 'dist/sentry.js',
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  legalComments: 'none',
  logLevel: 'warning',
  define: { 'process.env.NODE_ENV': '"production"' },
});
