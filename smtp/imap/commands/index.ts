import { str } from '../parser.js';
import { bad, type Handler } from '../session.js';
import { APPEND } from './append.js';
import { AUTHENTICATE, CAPABILITY, CHECK, ID, LOGIN, LOGOUT, NOOP, STARTTLS } from './auth.js';
import { copy, expunge } from './copy.js';
import { fetch } from './fetch.js';
import { IDLE } from './idle.js';
import {
  CLOSE,
  CREATE,
  DELETE,
  EXAMINE,
  LIST,
  LSUB,
  RENAME,
  SELECT,
  STATUS,
  SUBSCRIBE,
  UNSELECT,
  UNSUBSCRIBE,
} from './mailbox.js';
import { search } from './search.js';
import { store } from './store.js';

/** UID FETCH / STORE / SEARCH / COPY / MOVE / EXPUNGE. */
const UID: Handler = async (s, cmd) => {
  const sub = str(cmd.args[0], 'UID command').toUpperCase();
  const args = cmd.args.slice(1);
  switch (sub) {
    case 'FETCH':
      return fetch(s, cmd, args, true);
    case 'STORE':
      return store(s, cmd, args, true);
    case 'SEARCH':
      return search(s, cmd, args, true);
    case 'COPY':
      return copy(s, cmd, args, true, false);
    case 'MOVE':
      return copy(s, cmd, args, true, true);
    case 'EXPUNGE':
      return expunge(s, cmd, args, true);
    default:
      throw bad(`Unknown UID command ${sub.slice(0, 20)}`);
  }
};

/** Every command by name (RFC 3501 §6 and the extensions in CAPABILITY). */
export const HANDLERS: Record<string, Handler> = {
  CAPABILITY,
  NOOP,
  LOGOUT,
  ID,
  STARTTLS,
  LOGIN,
  AUTHENTICATE,
  SELECT,
  EXAMINE,
  CREATE,
  DELETE,
  RENAME,
  SUBSCRIBE,
  UNSUBSCRIBE,
  LIST,
  LSUB,
  STATUS,
  APPEND,
  IDLE,
  CHECK,
  CLOSE,
  UNSELECT,
  UID,
  FETCH: (s, cmd) => fetch(s, cmd, cmd.args, false),
  STORE: (s, cmd) => store(s, cmd, cmd.args, false),
  SEARCH: (s, cmd) => search(s, cmd, cmd.args, false),
  COPY: (s, cmd) => copy(s, cmd, cmd.args, false, false),
  MOVE: (s, cmd) => copy(s, cmd, cmd.args, false, true),
  EXPUNGE: (s, cmd) => expunge(s, cmd, cmd.args, false),
};
