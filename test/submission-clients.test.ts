import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

const exec = promisify(execFile);
/** Runs a client program; a missing one is named with how to install it (`.ci/run` installs both; nothing here skips). */
const run = (file: string, args: string[]) =>
  exec(file, args).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT')
      throw new Error(`${file} is not installed: apt-get install -y ${file} (as .ci/run does)`);
    throw err;
  });
let env: SendingStack;

beforeAll(async () => {
  env = await startSendingStack();
}, 120_000);
afterAll(async () => env?.stop());

/** The message row a submission answer named, once its delivery is recorded. */
async function delivered(id: string) {
  return eventually(async () => {
    const res = await env.stack.api('GET', `/api/messages/${id}`, { token: env.key });
    return res.body.message?.status === 'sent' ? res.body.message : undefined;
  });
}
const idIn = (text: string) => /250 2\.0\.0 Ok: queued as (msg_[\w-]+)/.exec(text)?.[1];

/** Python's smtplib as an application would call it: STARTTLS on 587-style, or SMTP_SSL on 465-style. */
const PYTHON = `
import smtplib, ssl, sys
from email.message import EmailMessage
mode, port, key, sender, to = sys.argv[1:6]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
msg = EmailMessage()
msg["From"] = sender
msg["To"] = to
msg["Subject"] = "From smtplib " + mode
msg.set_content("Sent by Python")
if mode == "ssl":
    s = smtplib.SMTP_SSL("127.0.0.1", int(port), context=ctx, timeout=30)
else:
    s = smtplib.SMTP("127.0.0.1", int(port), timeout=30)
    s.starttls(context=ctx)
s.login("app", key)
s.send_message(msg)
s.quit()
`;

describe('real SMTP clients other than nodemailer', () => {
  for (const mode of ['starttls', 'ssl'] as const) {
    it(`Python smtplib (${mode}) sends with the account key`, async () => {
      const port = mode === 'ssl' ? env.stack.service.submissionsPort! : env.stack.service.submissionPort!;
      const to = `py-${mode}@rcpt.test`;
      // smtplib keeps the DATA answer to itself: debug output (stderr) shows it.
      const script = PYTHON.replace('s.login(', 's.set_debuglevel(1)\ns.login(');
      const { stderr } = await run('python3', ['-c', script, mode, String(port), env.key, `hello@${FROM_DOMAIN}`, to]);
      const id = idIn(stderr);
      expect(id, stderr.slice(-2000)).toBeDefined();
      const got = await env.sink.waitFor((r) => r.to.includes(to));
      expect(got.raw.toString()).toContain(`Subject: From smtplib ${mode}`);
      expect(await delivered(id!)).toMatchObject({ id, subject: `From smtplib ${mode}` });
    });
  }

  for (const mode of ['starttls', 'implicit'] as const) {
    it(`swaks (${mode}) sends with the account key`, async () => {
      const to = `swaks-${mode}@rcpt.test`;
      const port = mode === 'implicit' ? env.stack.service.submissionsPort! : env.stack.service.submissionPort!;
      const { stdout } = await run('swaks', [
        '--server',
        `127.0.0.1:${port}`,
        mode === 'implicit' ? '--tls-on-connect' : '--tls',
        '--auth',
        'PLAIN',
        '--auth-user',
        'app',
        '--auth-password',
        env.key,
        '--from',
        `hello@${FROM_DOMAIN}`,
        '--to',
        to,
        '--header',
        `Subject: From swaks ${mode}`,
        '--body',
        'Sent by swaks',
      ]);
      const id = idIn(stdout);
      expect(id, stdout.slice(-2000)).toBeDefined();
      await env.sink.waitFor((r) => r.to.includes(to));
      expect(await delivered(id!)).toMatchObject({ id, subject: `From swaks ${mode}` });
    });
  }
});
