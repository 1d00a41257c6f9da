import { bigint } from 'drizzle-orm/pg-core';

/** ms-epoch timestamp column, read as a JS number (SPEC.md: timestamps are ms epoch). */
export const ms = (name: string) => bigint(name, { mode: 'number' });
