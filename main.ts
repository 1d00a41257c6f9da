import { ALL_ROLES, runRoles, type Role } from './runtime/service.js';

// `npm start` runs API, SMTP ingress, submission, IMAP and worker together; `npm start -- api` (or smtp, submission, imap, worker) runs one role.
const args = process.argv.slice(2);
const bad = args.filter((a) => !ALL_ROLES.includes(a as Role));
if (bad.length > 0) {
  console.error(`Unknown role(s): ${bad.join(', ')}. Roles: ${ALL_ROLES.join(', ')}`);
  process.exit(2);
}
await runRoles(args.length > 0 ? (args as Role[]) : ALL_ROLES);
