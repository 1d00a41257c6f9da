import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { runParse } from '../parsing/pool.js';

const INSERT_ROWS = 1000;
type Tx = Pick<Db, 'insert'>;

/**
 * Parses a CSV once, in the parse pool (core/parsing/csv-rows.ts; a CSV past its time or memory budget is
 * refused 422), and stages each record as a row of `contact_import_rows` from `fromSeq` on, a thousand per
 * insert. A CSV that does not parse is refused 400 `invalid_csv`; answers the number of records.
 */
export async function stageCsv(tx: Tx, importId: string, csv: string, fromSeq = 0): Promise<number> {
  const { rows, total } = await runParse('parseCsv', { csv, fromSeq });
  for (let i = 0; i < rows.length; i += INSERT_ROWS) {
    await tx
      .insert(schema.contactImportRows)
      .values(rows.slice(i, i + INSERT_ROWS).map((r, j) => ({ importId, seq: fromSeq + i + j, ...r })));
  }
  return total;
}
