import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { createDeliveryStore, type NewDelivery } from '../core/webhooks/deliveries.js';
import { countingDatabase } from './helpers/counting-db.js';

/**
 * The webhook delivery rows of an inbound batch go in as one named statement from arrays (core/array-insert.ts):
 * what it answers is what a read of the table gives, a row that was there already comes back unchanged and
 * not `made`, and the statement's text does not depend on how many rows it carries.
 */
let t: Awaited<ReturnType<typeof countingDatabase>>;
let store: ReturnType<typeof createDeliveryStore>;

beforeAll(async () => {
  t = await countingDatabase('deliveries-insert');
  store = createDeliveryStore({
    db: t.db,
    sealer: {} as never,
    routes: {} as never,
    net: {} as never,
    accountSecret: async () => 'unused',
  });
});
afterAll(async () => t?.close());
beforeEach(() => t.reset());

const delivery = (id: string, extra: Partial<NewDelivery> = {}): NewDelivery => ({
  id,
  userId: 'usr_d',
  messageId: `msg_${id}`,
  routeId: 'rte_d',
  domainId: 'dom_d',
  url: 'https://hooks.example/in?a=1&b="2"',
  kind: 'inbound',
  payload: { to: [{ address: `ünï+${id}@inbox.test` }], note: 'quote " backslash \\ line\u2028sep' },
  workflowId: 'inbound-batch-1',
  ...extra,
});

describe('webhook delivery rows from arrays', () => {
  it('answers each row as the table holds it, a repeated row unchanged and not made', async () => {
    const first = await store.createMany([delivery('dlv_a')]);
    expect(first).toHaveLength(1);
    expect(first[0]!.made).toBe(true);

    const again = await store.createMany([
      delivery('dlv_a', { url: 'https://changed.example/' }),
      delivery('dlv_b', { payload: undefined, workflowId: undefined, domainId: null }),
      delivery('dlv_c', { kind: 'replay' }),
    ]);
    const byId = new Map(again.map(({ made, ...row }) => [row.id, { made, row }]));
    expect([...byId.keys()].sort()).toEqual(['dlv_a', 'dlv_b', 'dlv_c']);
    expect(byId.get('dlv_a')!.made).toBe(false);
    expect(byId.get('dlv_a')!.row.url).toBe('https://hooks.example/in?a=1&b="2"');
    expect(byId.get('dlv_b')!.made).toBe(true);
    expect(byId.get('dlv_c')!.made).toBe(true);

    for (const [id, { row }] of byId) {
      const [read] = await t.db.select().from(schema.deliveries).where(eq(schema.deliveries.id, id));
      expect(row).toEqual(read);
    }
    const [b] = await t.db.select().from(schema.deliveries).where(eq(schema.deliveries.id, 'dlv_b'));
    expect(b).toMatchObject({ payload: null, workflowId: null, domainId: null, attempts: 0, status: 'pending' });
    expect(typeof b!.createdAt).toBe('number');
  });

  it('sends one text for one row and for many', async () => {
    await store.createMany([delivery('dlv_one')]);
    await store.createMany(Array.from({ length: 7 }, (_, i) => delivery(`dlv_many${i}`)));
    const inserts = t.counted.texts.filter((q) => q.startsWith('insert into "deliveries"'));
    expect(inserts).toHaveLength(2);
    expect(new Set(inserts).size).toBe(1);
    expect(inserts[0]).toContain('select * from unnest(');
  });
});
