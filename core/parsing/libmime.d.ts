/** The part of libmime (mailparser's MIME helpers, a direct dependency) this project calls; it ships no types. */
declare module 'libmime' {
  const libmime: {
    /** Decodes RFC 2047 encoded words (`=?UTF-8?Q?…?=`) in a header value. */
    decodeWords(value: string): string;
  };
  export default libmime;
}
