import type { Resolver } from 'node:dns/promises';
import type { Sealer } from '../secrets.js';
import { dkimKeyPublished } from './check.js';
import { generateDkimKey, nextSelector, type KeyHolder, type KeyOwner } from './dkim.js';

/** What a rotation's first step found: the domain gone, or the next key's selector and whether its zone is here. */
export type RotationStep = { state: 'gone' } | { state: 'ready'; selector: string; hosted: boolean };

/**
 * The steps of a DKIM key rotation (docs/domains.md) of one owner's key, a customer domain's or SERVICE_DOMAIN's,
 * each idempotent so the rotation workflow can retry any of them: create the next key under a new selector and
 * publish it, see it resolve, switch signing to it (the old key stays published), retire the old key.
 */
export function rotationSteps<R extends KeyHolder>(owner: KeyOwner<R>, deps: { sealer: Sealer; resolver: Resolver }) {
  /** Writes, then publishes what was written. */
  async function store(values: Parameters<KeyOwner<R>['write']>[0]): Promise<R | undefined> {
    const row = await owner.write(values);
    if (row) await owner.publish(row);
    return row;
  }

  return {
    /** Creates the next key under a new selector (kept when one is waiting); publishes it if the zone is here. */
    async begin(): Promise<RotationStep> {
      let row = await owner.read();
      if (!row) return { state: 'gone' };
      if (!row.dkimNextSelector) {
        const key = await generateDkimKey();
        const next = {
          dkimNextSelector: nextSelector(row.dkimSelector, row.dkimPrevSelector),
          dkimNextPublicKey: key.publicKeyB64,
          dkimNextPrivateKeySealed: deps.sealer.seal(key.privateKeyPem),
        };
        // Only the first writer's key counts (a retried activity keeps it).
        row = (await owner.write(next, true)) ?? (await owner.read());
        if (!row) return { state: 'gone' };
      }
      await owner.publish(row);
      return { state: 'ready', selector: row.dkimNextSelector!, hosted: row.hosted };
    },

    /** Whether the next key resolves (a zone served here serves it at once); false while it does not, or DNS failed. */
    async nextPublished(): Promise<boolean | 'gone'> {
      const row = await owner.read();
      if (!row) return 'gone';
      if (!row.dkimNextSelector || !row.dkimNextPublicKey) return true; // already switched (a retried step)
      if (row.hosted) return true;
      const next = { domain: row.domain, selector: row.dkimNextSelector, publicKeyB64: row.dkimNextPublicKey };
      return (await dkimKeyPublished(deps.resolver, next)) === true;
    },

    /** Signing moves to the next key; the old one stays published as the previous key. Idempotent. */
    async switchKey(): Promise<{ selector: string } | undefined> {
      const row = await owner.read();
      if (!row) return undefined;
      if (!row.dkimNextSelector || !row.dkimNextPublicKey || !row.dkimNextPrivateKeySealed) {
        return { selector: row.dkimSelector };
      }
      const done = await store({
        dkimPrevSelector: row.dkimSelector,
        dkimPrevPublicKey: row.dkimPublicKey,
        dkimSelector: row.dkimNextSelector,
        dkimPublicKey: row.dkimNextPublicKey,
        dkimPrivateKeySealed: row.dkimNextPrivateKeySealed,
        dkimNextSelector: null,
        dkimNextPublicKey: null,
        dkimNextPrivateKeySealed: null,
        dkimRotatedAt: Date.now(),
      });
      return done && { selector: done.dkimSelector };
    },

    /** The grace period is over: the previous key is no longer published. */
    async retire(): Promise<void> {
      await store({ dkimPrevSelector: null, dkimPrevPublicKey: null });
    },

    /** A next key that never resolved before the deadline is dropped; signing never moved. */
    async abandon(): Promise<void> {
      await store({ dkimNextSelector: null, dkimNextPublicKey: null, dkimNextPrivateKeySealed: null });
    },
  };
}
