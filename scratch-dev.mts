import { startDevServer } from './temporal/dev-server.js';
const s = await startDevServer({ port: 17999, namespace: 'default' });
console.log('ready', s.address);
process.on('SIGTERM', async () => { await s.stop(); process.exit(0); });
setInterval(() => undefined, 1 << 30);
