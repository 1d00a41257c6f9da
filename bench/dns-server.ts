/**
 * bench:inbound's DNS server (the senders' and the recipients' DNS hosts, an empty zone: every lookup is
 * answered, none found) as its own process, so what answering costs is not counted as the ingress's.
 * Prints `listening <address>` once it listens.
 */
import { startTestDns } from '../test/helpers/dns.js';

const dns = await startTestDns();
console.log(`listening ${dns.server.address}`);
process.on('SIGTERM', () => void dns.close().then(() => process.exit(0)));
