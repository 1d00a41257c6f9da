/** A Prometheus text exposition read into `series → value`, the series written `name{a="x",b="y"}` (labels as exposed). */
export type Scrape = Map<string, number>;

export async function scrape(url: string, token?: string): Promise<Scrape> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  const out: Scrape = new Map();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** The value of one series (0 when absent): `metric(s, 'svc_x_total', { source: 'api' })`. */
export function metric(s: Scrape, name: string, labels: Record<string, string> = {}): number {
  const keys = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const [series, value] of s) {
    const brace = series.indexOf('{');
    if ((brace < 0 ? series : series.slice(0, brace)) !== name) continue;
    if (keys.every((k) => series.includes(k))) total += value;
  }
  return total;
}
