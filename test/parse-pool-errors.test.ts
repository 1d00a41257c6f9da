import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseThreadErrors } from '../core/metrics.js';
import { createParsePool } from '../core/parsing/pool.js';
import { eventually } from './helpers/stack.js';

const failingEntry = fileURLToPath(new URL('./fixtures/parse-thread-fails-at-start.mjs', import.meta.url));
const strayCount = async () =>
  (await parseThreadErrors.get()).values.reduce((sum, v) => sum + (v.labels.code === 'unknown' ? v.value : 0), 0);

describe('parse pool threads', () => {
  it('a thread failing with no task of its own is counted, not thrown at the process', async () => {
    const before = await strayCount();
    // The pool starts one thread at once; without the pool's 'error' listener its failure would be an
    // uncaught exception (and this run would fail on it even if the count below were met).
    const pool = createParsePool({ threads: 1, timeoutMs: 5_000, memoryMb: 128, workerFile: failingEntry });
    try {
      // Each thread piscina starts fails the same way (it may start a second before it stops replacing them).
      await eventually(async () => (await strayCount()) >= before + 1);
      expect(await strayCount()).toBeGreaterThanOrEqual(before + 1);
    } finally {
      await pool.close();
    }
  });
});
