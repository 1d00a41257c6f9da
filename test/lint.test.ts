import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// Typed rules (no-floating-promises) need the file in the project: probes are linted as the text of real files.
const eslint = new ESLint();
const lint = async (code: string, filePath: string) =>
  (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.message);

describe('workflow determinism lint', () => {
  it('forbids Node built-ins, the database, the network and timers in workflows/', async () => {
    const messages = await lint(
      "import { readFileSync } from 'node:fs';\nimport pg from 'pg';\nimport { schema } from '../db/index.js';\nimport { createActivities } from '../activities/index.js';\nexport const x = () => [readFileSync, pg, schema, createActivities, setTimeout, fetch];\n",
      'workflows/ids.ts',
    );
    expect(messages.filter((m) => /deterministic|proxyActivities/.test(m))).toHaveLength(4);
    expect(messages.filter((m) => /sleep\(\)|activities\./.test(m))).toHaveLength(2);
  });

  it('allows type-only activity imports and the workflow SDK', async () => {
    const messages = await lint(
      "import { proxyActivities } from '@temporalio/workflow';\nimport type { Activities } from '../activities/index.js';\nexport const a = proxyActivities<Activities>({ startToCloseTimeout: '1 minute' });\n",
      'workflows/ids.ts',
    );
    expect(messages).toEqual([]);
  });

  it('leaves the same imports alone outside workflows/', async () => {
    expect(
      await lint("import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n", 'activities/index.ts'),
    ).toEqual([]);
  });
});

describe('super-linear regex lint', () => {
  const rules = async (code: string, filePath: string) =>
    (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);

  it('refuses a quadratic /g scan and a backtracking pattern in every kind of source file', async () => {
    const code =
      "export const a = (s: string) => s.replace(/[ \\t]+(?=\\r?\\n)/g, '');\nexport const b = (s: string) => /^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$/.test(s);\n";
    for (const file of [
      'core/ids.ts',
      'smtp/imap/parser.ts',
      'workflows/ids.ts',
      'scripts/doctor.ts',
      'test/lint.test.ts',
      'dashboard/src/ui.tsx',
    ]) {
      expect(await rules(code, file), file).toEqual([
        'regexp/no-super-linear-move',
        'regexp/no-super-linear-backtracking',
      ]);
    }
  });

  it('leaves linear forms alone', async () => {
    expect(
      await rules(
        "export const a = (s: string) => s.replace(/(?<!\\/)\\/+$/, '');\nexport const b = (s: string) => /<([^<>]{1,320})>/.exec(s);\n",
        'core/ids.ts',
      ),
    ).toEqual([]);
  });
});

describe('habits lint', () => {
  const rules = async (code: string, filePath: string) =>
    (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);

  it('refuses a floating promise in every kind of source file, and takes one awaited or marked void', async () => {
    const floating = 'const f = async (): Promise<number> => 1;\nf();\nexport {};\n';
    for (const file of [
      'core/ids.ts',
      'smtp/imap/parser.ts',
      'api/app.ts',
      'scripts/doctor.ts',
      'test/lint.test.ts',
      'dashboard/src/ui.tsx',
    ]) {
      expect(await rules(floating, file), file).toEqual(['@typescript-eslint/no-floating-promises']);
    }
    expect(
      await rules(
        'const f = async (): Promise<number> => 1;\nvoid f();\nexport const g = async () => await f();\n',
        'core/ids.ts',
      ),
    ).toEqual([]);
  });

  it('refuses process.env outside core/config.ts, tests and benchmarks', async () => {
    const code = 'export const level = process.env.LOG_LEVEL;\n';
    for (const file of ['core/ids.ts', 'db/index.ts', 'worker.ts', 'smtp/imap/parser.ts']) {
      expect(await rules(code, file), file).toEqual(['no-restricted-properties']);
    }
    for (const file of ['core/config.ts', 'test/lint.test.ts', 'bench/util.ts'])
      expect(await rules(code, file), file).toEqual([]);
  });
});
