import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalRspamd } from '../../runtime/rspamd.js';

/**
 * A real rspamd daemon (Debian's package, `.ci/run` installs it) on a free loopback port, its state in a
 * temporary directory; `nameserver` points its DNS at the test's loopback DNS server. `stop()` ends it
 * and removes the directory.
 */
export async function startTestRspamd(opts: { nameserver?: string } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'rspamd-test-'));
  const rspamd = await startLocalRspamd({ dir, ...opts });
  let stopped = false;
  return {
    url: rspamd.url,
    async stop() {
      if (stopped) return;
      stopped = true;
      await rspamd.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
