import type { Operation } from '../contract.js';
import * as accounts from './accounts.js';
import * as attachments from './attachments.js';
import * as domains from './domains.js';
import * as domainGuard from './domain-guard.js';
import * as domainSettings from './domain-settings.js';
import * as feedbackReports from './feedback-reports.js';
import * as encryption from './encryption.js';
import * as hosted from './hosted.js';
import * as keys from './keys.js';
import * as me from './me.js';
import * as oauthGrants from './oauth-grants.js';
import * as outbox from './outbox.js';
import * as registration from './registration.js';
import * as scopedKeys from './scoped-keys.js';
import * as templates from './templates.js';
import * as send from './send.js';
import * as smtpSettings from './smtp-settings.js';
import * as scheduled from './scheduled.js';
import * as messages from './messages.js';
import * as suppressions from './suppressions.js';
import * as webhooks from './webhooks.js';
import * as routes from './routes.js';
import * as inboundRoute from './inbound-route.js';
import * as deliveries from './deliveries.js';
import * as engagement from './engagement.js';
import * as appPasswords from './app-passwords.js';
import * as mailbox from './mailbox.js';
import * as contacts from './contacts.js';
import * as lists from './lists.js';
import * as broadcasts from './broadcasts.js';
import * as sequences from './sequences.js';
import * as events from './events.js';
import * as warmup from './warmup.js';
import * as metrics from './metrics.js';
import * as egressMetrics from './egress-metrics.js';
import * as inboundPolicy from './inbound-policy.js';

/** Every module of operations, by name: the runtime list below and the `AppRouter` type are both built from it. */
const modules = {
  accounts,
  keys,
  scopedKeys,
  me,
  oauthGrants,
  outbox,
  attachments,
  hosted,
  registration,
  domains,
  domainGuard,
  domainSettings,
  feedbackReports,
  encryption,
  templates,
  send,
  smtpSettings,
  scheduled,
  messages,
  suppressions,
  webhooks,
  routes,
  inboundRoute,
  deliveries,
  engagement,
  appPasswords,
  mailbox,
  contacts,
  lists,
  broadcasts,
  sequences,
  events,
  warmup,
  metrics,
  egressMetrics,
  inboundPolicy,
};

type OperationsIn<M> = Extract<M[keyof M], { handler: unknown; name: string }>;
/** The union of every operation's own type (its literal name and method, its zod schemas). */
export type AnyOperation = { [K in keyof typeof modules]: OperationsIn<(typeof modules)[K]> }[keyof typeof modules];

const ops = (m: Record<string, unknown>) =>
  Object.values(m).filter((v): v is Operation => typeof v === 'object' && v !== null && 'handler' in v);

/** Literal path segments sort before `:param` ones, so `/api/templates/base` is matched before `/api/templates/:id`. */
function specificity(a: Operation, b: Operation): number {
  const x = a.path.split('/');
  const y = b.path.split('/');
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const px = x[i]!.startsWith(':');
    const py = y[i]!.startsWith(':');
    if (px !== py) return px ? 1 : -1;
    if (x[i] !== y[i]) return 0;
  }
  return 0;
}

/** Every operation of the API, fixed paths ahead of parameterized ones. */
export const operations: readonly Operation[] = Object.values(modules)
  .flatMap((m) => ops(m))
  .sort(specificity);
