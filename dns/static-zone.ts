import type { DnsLookup, DnsRecord } from './server.js';

export type StaticZone = {
  lookup: DnsLookup;
  set(name: string, type: DnsRecord['type'], records: Omit<DnsRecord, 'name' | 'type'>[]): void;
  add(record: DnsRecord): void;
  remove(name: string, type?: string): void;
  clear(): void;
};

/** `(?<!\.)` lets a match start only at the first dot of a run, so the search stays linear. */
const normalize = (name: string): string => name.toLowerCase().replace(/(?<!\.)\.+$/, '');
const sameType = (a: string, b: string): boolean => a.toUpperCase() === b.toUpperCase();

/** An in-memory, mutable zone that claims authority over every name (wildcards one level deep): for tests and local development. */
export function createStaticZone(records: DnsRecord[] = []): StaticZone {
  const byName = new Map<string, DnsRecord[]>();

  const add = (record: DnsRecord): void => {
    const name = normalize(record.name);
    // TTL 0 unless given: resolvers (c-ares included) cache answers, and tests change records between queries.
    byName.set(name, [...(byName.get(name) ?? []), { ...record, name, ttl: record.ttl ?? 0 }]);
  };

  const remove = (name: string, type?: string): void => {
    const key = normalize(name);
    const kept = type ? (byName.get(key) ?? []).filter((r) => !sameType(r.type, type)) : [];
    if (kept.length) byName.set(key, kept);
    else byName.delete(key);
  };

  records.forEach(add);

  return {
    lookup: async (name, type) => {
      const key = normalize(name);
      // A name with no records of its own takes those of the wildcard one level up (`*.mx.example` answers `a.mx.example`).
      const atName =
        byName.get(key) ?? (byName.get(`*${key.slice(key.indexOf('.'))}`) ?? []).map((r) => ({ ...r, name: key }));
      return {
        records: atName.filter((r) => sameType(r.type, type)),
        authoritative: true,
        nameExists: atName.length > 0,
      };
    },
    set: (name, type, data) => {
      remove(name, type);
      for (const rest of data) add({ ...rest, name, type });
    },
    add,
    remove,
    clear: () => byName.clear(),
  };
}
