import { CsvError, parse } from 'csv-parse';
import { z } from 'zod';
import { badRequest } from '../errors.js';

/**
 * The pure half of a contact import (no database): a CSV as the rows to stage. It runs in the parse pool
 * (core/parsing/tasks.ts), never on a serving event loop; core/contacts/csv.ts stages what it answers.
 */

/** Bounds of one import: the CSV's size, its rows, the rejections kept, and a contact's own limits applied to the columns. */
export const IMPORT_LIMITS = {
  bytes: 5 * 1024 * 1024,
  rows: 100_000,
  rejectionsKept: 100,
  attributes: 100,
  valueChars: 2000,
  nameChars: 200,
};
const EMAIL_COLUMNS = ['email', 'e-mail', 'email address', 'email_address'];
const emailCheck = z.email();
/** One staged row, as contact_import_rows keeps it (without the import id and sequence number). */
export type CsvRow = {
  email?: string | null;
  name?: string | null;
  attributes?: Record<string, string> | null;
  rejection: string | null;
};
/** A CSV this service will not import (answered 400 `invalid_csv`, as the parser's own errors are). */
class CsvProblem extends Error {}

/** The columns of a header, lower-cased; refuses a header without an email column or with more attribute columns than a contact may hold. */
function columnsOf(header: string[]): string[] {
  const cols = header.map((h) => String(h).trim().toLowerCase());
  if (!EMAIL_COLUMNS.some((k) => cols.includes(k))) throw new CsvProblem('the header needs an "email" column');
  const attributes = new Set(
    cols
      .filter((k) => !EMAIL_COLUMNS.includes(k) && k !== 'name')
      .map(attributeKey)
      .filter(Boolean),
  );
  if (attributes.size > IMPORT_LIMITS.attributes)
    throw new CsvProblem(
      `at most ${IMPORT_LIMITS.attributes} attribute columns (a contact holds at most ${IMPORT_LIMITS.attributes} attributes)`,
    );
  return cols;
}

/** A column name as an attribute key (letters, digits, `_` and `-`, at most 64). */
const attributeKey = (column: string) => column.replace(/[^a-z0-9_-]+/g, '_').slice(0, 64);

/** A CSV record as a staged row: the email column, `name` (or first/last name), every other column an attribute; or why it is rejected. */
function toRow(rec: Record<string, string>): CsvRow {
  const reject = (rejection: string) => ({ rejection });
  const emailKey = EMAIL_COLUMNS.find((k) => k in rec);
  const email = emailKey ? (rec[emailKey] ?? '').toLowerCase() : '';
  if (!email) return reject('missing email');
  if (email.length > 254 || !emailCheck.safeParse(email).success)
    return reject(`invalid email "${email.slice(0, 100)}"`);
  const name =
    rec.name ||
    [rec.first_name ?? rec['first name'], rec.last_name ?? rec['last name']].filter(Boolean).join(' ') ||
    null;
  if (name && name.length > IMPORT_LIMITS.nameChars)
    return reject(`name: at most ${IMPORT_LIMITS.nameChars} characters`);
  const attributes: Record<string, string> = {};
  for (const [k, v] of Object.entries(rec)) {
    if (k === emailKey || k === 'name' || v === '' || v === undefined) continue;
    const key = attributeKey(k);
    if (!key) continue;
    if (v.length > IMPORT_LIMITS.valueChars) return reject(`${key}: at most ${IMPORT_LIMITS.valueChars} characters`);
    attributes[key] = v;
  }
  return { email, name, attributes, rejection: null };
}

/**
 * Parses a CSV as a stream of records and answers the rows from `fromSeq` on with the count of every
 * record; a CSV past the row limit, without an email column or that does not parse is refused 400 `invalid_csv`.
 */
export async function parseCsvRows(csv: string, fromSeq = 0): Promise<{ rows: CsvRow[]; total: number }> {
  const parser = parse(csv, {
    columns: columnsOf,
    skip_empty_lines: true,
    trim: true,
    bom: true,
    relax_column_count: true,
    max_record_size: 64 * 1024,
  });
  const rows: CsvRow[] = [];
  let seq = 0;
  try {
    for await (const rec of parser as AsyncIterable<Record<string, string>>) {
      if (seq >= IMPORT_LIMITS.rows) throw new CsvProblem(`at most ${IMPORT_LIMITS.rows} rows`);
      if (seq >= fromSeq) rows.push(toRow(rec));
      seq += 1;
    }
  } catch (err) {
    parser.destroy();
    if (err instanceof CsvError || err instanceof CsvProblem) throw badRequest(`csv: ${err.message}`, 'invalid_csv');
    throw err;
  }
  return { rows, total: seq };
}
