import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { brotliDecompressSync } from 'node:zlib';

/** A Chromium that started here: its path, where it came from, and the environment it needs. */
export type FoundChromium = { path: string; from: string; env: Record<string, string> };

/** What the search found: the browser, or nothing and why each place was passed over. */
export type ChromiumSearch = { found?: FoundChromium; passedOver: string[] };

/** The line the run prints when the browser tests skip. */
export const SKIP_HINT = 'no Chromium (set CHROMIUM_PATH or apt-get install chromium)';

const SPARTICUZ = '@sparticuz/chromium';

/** True when `path --version` starts and exits 0 with the given extra environment. */
function starts(path: string, env: Record<string, string> = {}): boolean {
  if (!existsSync(path)) return false;
  const run = spawnSync(path, ['--version'], { env: { ...process.env, ...env }, timeout: 20_000, stdio: 'ignore' });
  return run.status === 0;
}

/** The `bin` folder of the installed @sparticuz/chromium package, found from its entry point. */
function sparticuzBin(entry: string): string | undefined {
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'bin', 'chromium.br'))) return join(dir, 'bin');
  }
  return undefined;
}

/** The NSS and expat libraries the package ships (bin/al2023.tar.br), unpacked once into the temp folder. */
function shippedLibraries(bin: string | undefined): string | undefined {
  const archive = bin && join(bin, 'al2023.tar.br');
  if (!archive || !existsSync(archive)) return undefined;
  const dir = join(tmpdir(), 'svc-chromium-libs');
  if (!existsSync(join(dir, 'lib'))) {
    mkdirSync(dir, { recursive: true });
    const tar = join(dir, 'al2023.tar');
    writeFileSync(tar, brotliDecompressSync(readFileSync(archive)));
    if (spawnSync('tar', ['-xf', tar, '-C', dir]).status !== 0) return undefined;
  }
  return join(dir, 'lib');
}

/**
 * The npm package @sparticuz/chromium, when it is installed: it inflates its binary into the temp folder. Its
 * binary links against NSS and expat; where the system has none, the libraries it ships (al2023.tar.br) are used.
 */
async function fromSparticuz(passedOver: string[]): Promise<FoundChromium | undefined> {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(SPARTICUZ);
  } catch {
    passedOver.push(`${SPARTICUZ}: not installed`);
    return undefined;
  }
  // A name in a variable: the package is optional, so the type checker does not look for it.
  const name = SPARTICUZ;
  let path: string;
  try {
    const mod = (await import(name)) as { default: { executablePath(): Promise<string> } };
    path = await mod.default.executablePath();
  } catch (err) {
    passedOver.push(`${SPARTICUZ}: ${(err as Error).message}`);
    return undefined;
  }
  if (starts(path)) return { path, from: SPARTICUZ, env: {} };
  const libs = shippedLibraries(sparticuzBin(entry));
  if (libs) {
    const env = { LD_LIBRARY_PATH: [libs, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':') };
    if (starts(path, env)) return { path, from: `${SPARTICUZ} (its own libraries)`, env };
  }
  passedOver.push(`${SPARTICUZ}: ${path} does not start here`);
  return undefined;
}

/**
 * Finds a Chromium that starts on this machine, in order: CHROMIUM_PATH, /usr/bin/chromium, then the npm
 * package @sparticuz/chromium if it is installed. NO_SYSTEM_CHROMIUM=1 (for testing the skip only) passes
 * over /usr/bin/chromium as if it were missing.
 */
export async function findChromium(): Promise<ChromiumSearch> {
  const passedOver: string[] = [];
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) {
    if (starts(fromEnv)) return { found: { path: fromEnv, from: 'CHROMIUM_PATH', env: {} }, passedOver };
    passedOver.push(`CHROMIUM_PATH=${fromEnv} does not start`);
  }
  const system = '/usr/bin/chromium';
  if (process.env.NO_SYSTEM_CHROMIUM === '1') passedOver.push(`${system}: hidden by NO_SYSTEM_CHROMIUM=1`);
  else if (starts(system)) return { found: { path: system, from: system, env: {} }, passedOver };
  else passedOver.push(`${system}: missing or does not start`);
  const found = await fromSparticuz(passedOver);
  return found ? { found, passedOver } : { passedOver };
}

/** The test files that drive a browser: those that call launchChromium. */
export function browserTestFiles(testDir: string): string[] {
  return readdirSync(testDir)
    .filter((f) => f.endsWith('.test.ts') && readFileSync(join(testDir, f), 'utf8').includes('launchChromium('))
    .map((f) => join(testDir, f));
}
