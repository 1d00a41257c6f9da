import { str } from '../parser.js';
import { bad, no, type Handler, type Session } from '../session.js';
import { sync } from '../view.js';

/** Logs the session in; a refusal is answered with the RFC 5530 status it deserves (answers.ts). */
async function logIn(s: Session, user: string, secret: string): Promise<void> {
  s.login = await s.core.mailboxes.login(user, secret, s.ip);
  s.state = 'auth';
}
const notAuthOnly = (s: Session) => {
  if (s.state !== 'notauth') throw bad('Already logged in');
};

export const CAPABILITY: Handler = async (s, cmd) => {
  s.untagged(`CAPABILITY ${s.capabilities()}`);
  s.ok(cmd.tag, 'CAPABILITY completed');
};

export const NOOP: Handler = async (s, cmd) => {
  if (s.view) await sync(s, true);
  s.ok(cmd.tag, 'NOOP completed');
};
export const CHECK: Handler = async (s, cmd) => {
  s.requireSelected();
  await NOOP(s, cmd);
};

export const ID: Handler = async (s, cmd) => {
  s.untagged('ID ("name" "svc-mail")');
  s.ok(cmd.tag, 'ID completed');
};

export const LOGOUT: Handler = async (s, cmd) => {
  s.untagged('BYE svc-mail logging out');
  s.ok(cmd.tag, 'LOGOUT completed');
  s.state = 'logout';
  s.socket.end();
};

export const STARTTLS: Handler = async (s, cmd) => {
  if (s.secure) throw bad('TLS is already active');
  notAuthOnly(s);
  s.ok(cmd.tag, 'Begin TLS negotiation now');
  s.startTls();
};

export const LOGIN: Handler = async (s, cmd) => {
  notAuthOnly(s);
  if (cmd.args.length !== 2) throw bad('LOGIN needs a user name and a password');
  await logIn(s, str(cmd.args[0], 'user name'), str(cmd.args[1], 'password'));
  s.ok(cmd.tag, `[CAPABILITY ${s.capabilities()}] Logged in`);
};

/** SASL PLAIN (RFC 4616): `authzid NUL authcid NUL password`, base64, inline (SASL-IR) or after `+`. */
export const AUTHENTICATE: Handler = async (s, cmd) => {
  notAuthOnly(s);
  const mech = str(cmd.args[0], 'mechanism').toUpperCase();
  if (mech !== 'PLAIN') throw no('Only AUTHENTICATE PLAIN is supported', 'CANNOT');
  let response = cmd.args[1] ? str(cmd.args[1]) : undefined;
  if (response === undefined) {
    s.write('+ ');
    response = await s.nextLine();
  }
  if (response.trim() === '*') throw bad('Authentication canceled');
  const text = /^[A-Za-z0-9+/]*={0,2}$/.test(response.trim())
    ? Buffer.from(response.trim(), 'base64').toString('utf8')
    : '';
  const [authz, user, secret] = text.split('\u0000');
  if (user === undefined || secret === undefined || (authz && authz !== user)) throw bad('Malformed PLAIN response');
  await logIn(s, user, secret);
  s.ok(cmd.tag, `[CAPABILITY ${s.capabilities()}] Logged in`);
};
