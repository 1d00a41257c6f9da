import { describe, expect, it } from 'vitest';
import { newId, randomToken } from '../core/ids.js';

describe('ids', () => {
  it('hands out distinct random ids across many refills of the random pool', () => {
    const ids = Array.from({ length: 20_000 }, () => newId('msg'));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 100)) expect(id).toMatch(/^msg_[A-Za-z0-9_-]{24}$/);
    // Every byte value turns up (no stuck or zeroed region of the pool).
    const bytes = Buffer.from(ids.map((i) => i.slice(4)).join(''), 'base64url');
    expect(new Set(bytes).size).toBe(256);
  });

  it('makes tokens of any size, past the pooled ones too', () => {
    expect(randomToken(3)).toMatch(/^[A-Za-z0-9_-]{4}$/);
    const big = randomToken(1024);
    expect(Buffer.from(big, 'base64url').length).toBe(1024);
    expect(randomToken(1024)).not.toBe(big);
  });
});
