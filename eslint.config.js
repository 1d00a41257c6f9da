import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';
import regexp from 'eslint-plugin-regexp';

/** Imports a workflow may never make: Node built-ins, the database, the network, our I/O layers. */
const NOT_IN_WORKFLOWS = [
  ...builtinModules,
  ...builtinModules.map((m) => `node:${m}`),
  'pg',
  'drizzle-orm',
  'drizzle-orm/*',
  '@electric-sql/*',
  'nodemailer',
  'nodemailer/*',
  'smtp-server',
  'mailparser',
  'mailauth',
  'express',
  '@trpc/*',
  'jose',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity',
  '../db/*',
  '../core/*',
  '../api/*',
  '../smtp/*',
  '../temporal/*',
  '../runtime/*',
  // The ground floor of core (pure rules such as the ladder's end) is shared with workflow code; the workflow
  // bundle still refuses Node built-ins in anything it pulls in from there.
  '!../core/mail',
];

export default tseslint.config(
  { ignores: ['node_modules/', '.data/', '.temporal/', 'dist/', 'db/migrations/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  {
    // A promise nobody awaits loses its error and its ordering: await it, return it, or mark it `void` on purpose.
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
  {
    // Configuration is read in one place (core/config.ts); tests and benchmarks set up their own processes.
    ignores: ['core/config.ts', 'test/**', 'bench/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Read configuration through core/config.ts (loadConfig), not process.env.',
        },
      ],
    },
  },
  {
    // Regexes over outside input must be linear: no backtracking blow-up, no quadratic /g scan.
    // Not the plugin's recommended set: its style rules are not wanted.
    plugins: { regexp },
    rules: {
      'regexp/no-super-linear-backtracking': 'error',
      'regexp/no-super-linear-move': 'error',
      // Also a capturing group that a neighbouring quantifier silently shortens (no finding in the tree when added).
      'regexp/no-misleading-capturing-group': 'error',
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: NOT_IN_WORKFLOWS,
              message:
                'Workflows are deterministic: no I/O imports. Reach I/O through activities (import type + proxyActivities).',
              allowTypeImports: true,
            },
          ],
          paths: [
            {
              name: '../activities/index.js',
              message: 'Import activities with "import type" and call them through proxyActivities.',
              allowTypeImports: true,
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'setInterval', message: 'Use sleep() in a loop from @temporalio/workflow.' },
        { name: 'fetch', message: 'Network calls belong in activities.' },
        { name: 'process', message: 'Workflows cannot read the environment: pass values as arguments.' },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
);
