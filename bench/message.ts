/** The message bench:send sends, through the platform and through its reference alike. */
export const benchMessage = (from: string, i: number) => ({
  from,
  to: `user${i}@rcpt.test`,
  subject: `Message ${i}`,
  text: `Hello ${i}`,
  html: `<p>Hello <b>${i}</b></p>`,
});
