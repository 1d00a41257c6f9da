import { type Handler } from '../session.js';
import { sync } from '../view.js';

/**
 * IDLE (RFC 2177): new mail and flag changes are pushed as they happen. Filing in this process
 * wakes the session at once; a poll every IMAP_POLL_MS catches what other processes filed. The
 * password is re-checked on each poll, so a revoked one ends the session even while idling.
 */
export const IDLE: Handler = async (s, cmd) => {
  const login = s.requireAuth();
  s.write('+ idling');
  let running = false;
  let stop = false;
  const tick = async () => {
    if (running || stop) return;
    running = true;
    try {
      if (!(await s.core.appPasswords.stillValid(login.scope)))
        return s.close('Credentials revoked or changed; log in again');
      if (s.view) await sync(s, true);
    } catch (err) {
      console.error('[imap] IDLE update failed:', (err as Error).message);
    } finally {
      running = false;
    }
  };
  const unsubscribe = s.core.mailboxStore.onChange((id) => {
    if (id === s.view?.box.id) void tick();
  });
  const timer = setInterval(() => void tick(), s.opts.pollMs);
  const end = () => {
    stop = true;
    unsubscribe();
    clearInterval(timer);
  };
  const release = s.onClose(end);
  const line = await s.nextLine();
  // DONE ends this IDLE: its listener, timer and close hook go now, not when the connection ends.
  release();
  end();
  if (line.trim().toUpperCase() !== 'DONE') return s.write(`${cmd.tag} BAD Expected DONE`);
  s.ok(cmd.tag, 'IDLE terminated');
};
