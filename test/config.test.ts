import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../core/config.js';

const dir = () => mkdtempSync(join(tmpdir(), 'svc-cfg-'));

describe('configuration', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig({ DATA_DIR: dir() });
    expect(c).toMatchObject({
      port: 3000,
      publicUrl: 'http://localhost:3000',
      databaseUrl: undefined,
      smtpPort: 2525,
      serviceDomain: 'localhost',
      dnsServers: [],
      outboundMode: 'capture',
      mxPort: 25,
      dnsPort: undefined,
      temporal: { address: undefined, namespace: 'default', taskQueue: 'svc-mail', uiPort: 8233, devPort: 7233 },
      webhookRetrySchedule: [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
      webhookTimeoutMs: 15_000,
      defaultPlan: 'free',
    });
  });

  it('derives outbound mode from relay and production settings', () => {
    expect(loadConfig({ DATA_DIR: dir(), SMTP_RELAY_URL: 'smtp://u:p@relay.example:587' }).outboundMode).toBe('relay');
    expect(loadConfig({ DATA_DIR: dir(), NODE_ENV: 'production' }).outboundMode).toBe('mx');
    expect(() => loadConfig({ DATA_DIR: dir(), OUTBOUND_MODE: 'relay' })).toThrow(/SMTP_RELAY_URL/);
  });

  it('parses lists and trims a trailing slash from PUBLIC_URL', () => {
    const c = loadConfig({
      DATA_DIR: dir(),
      DNS_SERVERS: '127.0.0.1:5353, 10.0.0.1',
      WEBHOOK_RETRY_SCHEDULE: '100,200',
      PUBLIC_URL: 'https://mail.example.com/',
    });
    expect(c.dnsServers).toEqual(['127.0.0.1:5353', '10.0.0.1']);
    expect(c.webhookRetrySchedule).toEqual([100, 200]);
    expect(c.publicUrl).toBe('https://mail.example.com');
  });

  it('names every bad variable in one clear error', () => {
    let err: unknown;
    try {
      loadConfig({
        DATA_DIR: dir(),
        PORT: 'eighty',
        OUTBOUND_MODE: 'carrier-pigeon',
        DATABASE_URL: 'mysql://x',
        TEMPORAL_ADDRESS: 'nohost',
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    for (const name of ['PORT', 'OUTBOUND_MODE', 'DATABASE_URL', 'TEMPORAL_ADDRESS']) expect(msg).toContain(name);
    expect(() => loadConfig({ DATA_DIR: dir(), WEBHOOK_RETRY_SCHEDULE: '5,soon' })).toThrow(/WEBHOOK_RETRY_SCHEDULE/);
    expect(loadConfig({ DATA_DIR: dir(), WEBHOOK_TIMEOUT_MS: '2000' }).webhookTimeoutMs).toBe(2000);
    expect(() => loadConfig({ DATA_DIR: dir(), WEBHOOK_TIMEOUT_MS: '20000' })).toThrow(/WEBHOOK_TIMEOUT_MS/);
    expect(() => loadConfig({ DATA_DIR: dir(), SECRET_KEY: 'short' })).toThrow(/SECRET_KEY/);
    expect(() => loadConfig({ DATA_DIR: dir(), PLANS: '{"x":{"includedEmails":-1}}' })).toThrow(/PLANS/);
    expect(() => loadConfig({ DATA_DIR: dir(), DEFAULT_PLAN: 'gold' })).toThrow(/DEFAULT_PLAN/);
  });

  it('generates SECRET_KEY once and keeps it in DATA_DIR, private to the owner', () => {
    const d = dir();
    const a = loadConfig({ DATA_DIR: d }).secretKey;
    expect(loadConfig({ DATA_DIR: d }).secretKey).toBe(a);
    expect(readFileSync(join(d, 'secret.key'), 'utf8').trim()).toBe(a);
    expect(statSync(join(d, 'secret.key')).mode & 0o777).toBe(0o600);
    expect(loadConfig({ DATA_DIR: d, SECRET_KEY: 'x'.repeat(40) }).secretKey).toBe('x'.repeat(40));
  });

  it('accepts plans from configuration', () => {
    const c = loadConfig({
      DATA_DIR: dir(),
      PLANS: JSON.stringify({ team: { includedEmails: null, dailySendCap: 5, overage: 'metered', paid: true } }),
      DEFAULT_PLAN: 'team',
    });
    expect(c.plans.team).toEqual({ includedEmails: null, dailySendCap: 5, overage: 'metered', paid: true });
  });
});
