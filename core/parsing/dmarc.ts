import type { AggregateBounds, AggregateParse, DmarcReport } from './aggregate-types.js';

/** PLACEHOLDER (being written): a DMARC aggregate report mail read into a DmarcReport. */
export async function parseDmarcMail(_raw: Buffer, _bounds: AggregateBounds): Promise<AggregateParse<DmarcReport>> {
  return { report: null, reason: 'not implemented' };
}
