import { bigint, customType } from 'drizzle-orm/pg-core';

/** ms-epoch timestamp column, read as a JS number (SPEC.md: timestamps are ms epoch). */
export const ms = (name: string) => bigint(name, { mode: 'number' });

/** Binary column, read as a Buffer whichever driver (pg, PGlite) returned it. */
export const bytea = customType<{ data: Buffer; driverData: Buffer | Uint8Array }>({
  dataType: () => 'bytea',
  fromDriver: (v) => (Buffer.isBuffer(v) ? v : Buffer.from(v)),
});
