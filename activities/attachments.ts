import type { AttachmentService } from '../core/attachments/service.js';

/** Attachment housekeeping: deletes stored files past their retention (table stored_files). */
export function attachmentActivities(deps: { attachments: AttachmentService }) {
  return {
    /** Deletes up to `limit` expired stored files and answers how many; idempotent (a retry finds fewer). */
    async deleteExpiredAttachments(input: { limit: number }): Promise<number> {
      return deps.attachments.deleteExpired(Date.now(), input.limit);
    },
  };
}
