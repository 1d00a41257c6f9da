import { z } from 'zod';
import { RETENTION_DAYS } from '../../core/attachments/service.js';
import { defineOperation } from '../contract.js';

/** Sending credentials (SPEC.md, Authentication): the API keys, plus a session or OAuth token acting for the account. */
export const ATTACHMENT_AUTH = ['account_key', 'scoped_key', 'session', 'oauth'] as const;

const retentionDays = z.literal(RETENTION_DAYS).describe('Days the file (and its URL) is kept: 7, 30, 90 or 365');

/**
 * POST /v1/attachments with a JSON body. Raw bytes with `?filename=` take the same path through
 * api/attachments-routes.ts, which answers with this operation's status and response shape.
 */
export const uploadAttachment = defineOperation({
  name: 'attachments.upload',
  method: 'POST',
  path: '/v1/attachments',
  auth: ATTACHMENT_AUTH,
  status: 201,
  idempotencyKey: true,
  summary:
    'Store a file (base64 content or an http(s) URL fetched now, max 25 MB) and answer a signed, time-limited URL.',
  body: z.strictObject({
    filename: z.string().min(1).max(255).optional().describe('File name; optional when it can be derived from the url'),
    path: z
      .string()
      .max(4096)
      .optional()
      .describe(
        'Local path, read by client tooling only: the server never reads its own disk for a caller and answers 400 path_not_supported',
      ),
    url: z
      .string()
      .min(1)
      .max(2048)
      .optional()
      .describe('Public http(s) URL fetched now and re-hosted (max 25 MB, at most 5 redirects)'),
    content: z.string().optional().describe('The file bytes, base64'),
    contentType: z
      .string()
      .min(3)
      .max(255)
      .optional()
      .describe(
        'Media type; default inferred from the fetched response or the file extension, else application/octet-stream',
      ),
    retentionDays: retentionDays.default(7),
  }),
  output: z.object({
    id: z.string().describe('Storage key of the file').optional(),
    url: z
      .string()
      .describe('Signed download URL, valid until expiresAt; usable as an attachment url in sends or as an inline link')
      .optional(),
    filename: z.string().optional(),
    contentType: z.string().optional(),
    size: z.number().int().describe('Stored bytes').optional(),
    expiresAt: z.iso.datetime().describe('When the file is deleted and the URL stops working (ISO 8601)').optional(),
  }),
  handler: (input, { core, actor }) => core.attachments.upload(actor.userId, input),
});
