import type { AggregateBounds, AggregateParse, TlsReport } from './aggregate-types.js';

/** PLACEHOLDER (being written): an RFC 8460 report mail read into a TlsReport. */
export async function parseTlsReportMail(_raw: Buffer, _bounds: AggregateBounds): Promise<AggregateParse<TlsReport>> {
  return { report: null, reason: 'not implemented' };
}
