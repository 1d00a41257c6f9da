/**
 * The session: the session token (a JWT from sign-up, sign-in or a mailed link) kept in sessionStorage,
 * so it lives as long as the tab and nothing else is stored. Keys and secrets are read from the API when
 * shown and never stored.
 */
const KEY = 'svc-session';

export type Session = { token: string; email: string; emailVerified: boolean };

export function readSession(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
}

const listeners = new Set<() => void>();
export function onSessionChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function saveSession(s: Session | undefined): void {
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s));
  else sessionStorage.removeItem(KEY);
  for (const fn of listeners) fn();
}
