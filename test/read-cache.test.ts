import { describe, expect, it } from 'vitest';
import { createReadCache } from '../core/shaping/read-cache.js';

/**
 * The short-lived views the delivery path reads on every message (core/shaping/read-cache.ts): lanes that
 * find a view stale together share one read, and nothing older than what the process knows is kept.
 */
function harness(ttlMs = 1000) {
  let clock = 0;
  const loads: {
    key: string;
    previous: number | undefined;
    resolve: (v: number) => void;
    reject: (e: Error) => void;
  }[] = [];
  const cache = createReadCache<string, number>({
    ttlMs,
    now: () => clock,
    load: (key, previous) => new Promise((resolve, reject) => loads.push({ key, previous, resolve, reject })),
  });
  return { cache, loads, tick: (ms: number) => (clock += ms) };
}

describe('read cache', () => {
  it('shares one read among lanes that miss together, then answers from memory until the view expires', async () => {
    const { cache, loads, tick } = harness();
    const lanes = Array.from({ length: 20 }, () => cache.get('site'));
    expect(loads).toHaveLength(1);
    loads[0]!.resolve(7);
    expect(await Promise.all(lanes)).toEqual(Array(20).fill(7));
    tick(999);
    expect(await cache.get('site')).toBe(7);
    expect(loads).toHaveLength(1);
    // Expired: read again, and the read is told the expired value (to keep what did not change).
    tick(1);
    const again = [cache.get('site'), cache.get('site')];
    expect(loads).toHaveLength(2);
    expect(loads[1]!.previous).toBe(7);
    loads[1]!.resolve(8);
    expect(await Promise.all(again)).toEqual([8, 8]);
  });

  it('times a value from when its read was asked, so a slow read does not stretch the view', async () => {
    const { cache, loads, tick } = harness();
    const first = cache.get('site');
    tick(600);
    loads[0]!.resolve(1);
    await first;
    tick(400); // 1000 ms after the read was asked
    void cache.get('site');
    expect(loads).toHaveLength(2);
  });

  it('does not keep a read that a fresher value or a forget overtook, and does not share it any more', async () => {
    const { cache, loads } = harness();
    const stale = cache.get('site');
    cache.set('site', 2); // a statement answered the row's newer state meanwhile
    loads[0]!.resolve(1);
    expect(await stale).toBe(1);
    expect(await cache.get('site')).toBe(2);
    expect(loads).toHaveLength(1);

    const before = cache.get('plan');
    cache.forget('plan'); // this process changed the row
    const after = cache.get('plan');
    expect(loads).toHaveLength(3); // a new read, not the one begun before the change
    loads[1]!.resolve(10);
    loads[2]!.resolve(11);
    expect([await before, await after]).toEqual([10, 11]);
    expect(await cache.get('plan')).toBe(11);
  });

  it('keeps no failed read: every lane sharing it sees the error, and the next one reads again', async () => {
    const { cache, loads } = harness();
    const lanes = [cache.get('site'), cache.get('site')];
    loads[0]!.reject(new Error('connection reset'));
    for (const lane of lanes) await expect(lane).rejects.toThrow('connection reset');
    const next = cache.get('site');
    expect(loads).toHaveLength(2);
    loads[1]!.resolve(3);
    expect(await next).toBe(3);
  });
});
