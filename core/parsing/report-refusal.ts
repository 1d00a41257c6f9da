/**
 * Why a mail was not read as an aggregate report (DMARC, TLS): a short snake_case reason for the log and the
 * metric (`not_a_report`, `report_too_large`, `too_many_entries`, `bad_archive`, `bad_xml`, `doctype_refused`,
 * `too_many_elements`, `bad_json`, `missing_fields`). Thrown inside the parsers, answered as `{ report: null, reason }`.
 */
export class ReportRefusal extends Error {
  constructor(readonly reason: string) {
    super(reason);
  }
}
