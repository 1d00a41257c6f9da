/**
 * `npm run doctor`: checks an installation the way a receiving mail server and an operator would see it
 * (README, "Production checklist"), one line per check with the fix; exits 1 naming the required checks
 * that failed, 2 on invalid configuration.
 */
import { Connection } from '@temporalio/client';
import { ConfigError, loadConfig, type Config } from '../core/config.js';
import { failures, formatReport, within } from '../core/operator/checks.js';
import { runDoctor, type DoctorDeps } from '../core/operator/doctor.js';
import { serviceDomainRecords } from '../core/domains/service-domain.js';
import { openDatabase, schema, type Database } from '../db/index.js';
import { namespaceRetentionMs } from '../temporal/client.js';

async function openTemporal(config: Config): Promise<{ deps: DoctorDeps['temporal']; close(): Promise<void> }> {
  const address = config.temporal.address ?? `127.0.0.1:${config.temporal.devPort}`;
  try {
    const connection = await within(5_000, `Temporal at ${address}`, () =>
      Connection.connect({ address, connectTimeout: 3_000 }),
    );
    return {
      deps: {
        ping: async () => void (await connection.workflowService.getSystemInfo({})),
        retentionMs: () => namespaceRetentionMs(connection, config.temporal.namespace),
      },
      close: () => connection.close(),
    };
  } catch (err) {
    return { deps: { error: `cannot connect to ${address}: ${(err as Error).message}` }, close: async () => {} };
  }
}

async function main(): Promise<number> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) return (console.error(err.message), 2);
    throw err;
  }
  let database: Database | undefined;
  let dbError = '';
  try {
    database = await within(10_000, 'opening the database', () =>
      openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }),
    );
  } catch (err) {
    dbError = (err as Error).message;
  }
  const temporal = await openTemporal(config);
  try {
    const results = await runDoctor({ config, database: database ?? { error: dbError }, temporal: temporal.deps });
    console.log(formatReport(results));
    const key = database
      ? (
          await database.db
            .select()
            .from(schema.serviceDomains)
            .catch(() => [])
        ).find((r) => r.domain === config.serviceDomain)
      : undefined;
    if (key && config.dnsPort === undefined) {
      console.log(
        `\nRecords to publish for ${config.serviceDomain} (DNS_PORT is unset, so the built-in DNS server does not serve them):`,
      );
      for (const r of serviceDomainRecords(config.serviceDomain, {
        publicKeyB64: key.dkimPublicKey,
        publicIp: config.publicIp,
      })) {
        console.log(
          `  ${r.name}  ${r.type}  ${r.priority !== undefined ? `${r.priority} ` : ''}${r.type === 'TXT' ? `"${r.value}"` : r.value}`,
        );
      }
    }
    return failures(results).length ? 1 : 0;
  } finally {
    await temporal.close();
    await database?.close();
  }
}

// Exit explicitly: a peer that never answered (a half-open database connection, say) must not keep the process alive.
process.exit(await main());
