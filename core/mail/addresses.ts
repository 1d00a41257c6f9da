import addressparser from 'nodemailer/lib/addressparser';
import { z } from 'zod';
import { badRequest } from '../errors.js';

export type Mailbox = { name: string; address: string };
const emailCheck = z.email();

/** Parses one address, bare or in display-name form ("Ada <ada@example.com>"); 400 when it is not exactly one valid mailbox. */
export function parseMailbox(value: string, field: string): Mailbox {
  const parsed = addressparser(value, { flatten: true });
  const box = parsed.length === 1 ? parsed[0] : undefined;
  const address = box && 'address' in box ? (box.address ?? '').trim() : '';
  if (!box || !address || !emailCheck.safeParse(address).success) {
    throw badRequest(`${field}: "${value}" is not a valid email address`, 'invalid_address');
  }
  return { name: box.name ?? '', address: address.toLowerCase() };
}

/** Parses a string or list of addresses; each entry must be one mailbox. */
export function parseMailboxes(value: string | string[] | undefined, field: string): Mailbox[] {
  if (value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  return list.map((v, i) => parseMailbox(v, Array.isArray(value) ? `${field}[${i}]` : field));
}

/** "Name <address>" for a header, or the bare address without a name. */
export const formatMailbox = (m: Mailbox) =>
  m.name ? `"${m.name.replace(/["\\]/g, '\\$&')}" <${m.address}>` : m.address;
export const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();
