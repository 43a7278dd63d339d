// ESLint for the dashboard (`npm run lint`, which `make lint` runs): the recommended rules on
// browser ES modules; build.mjs and this file run in Node. Prettier (.prettierrc.json) owns the
// layout, so no rule here is about style.
import js from '@eslint/js';
import globals from 'globals';

export default [
  js.configs.recommended,
  {
    files: ['src/**/*.js'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: globals.browser },
  },
  {
    files: ['build.mjs', 'eslint.config.js'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: globals.node },
  },
];
