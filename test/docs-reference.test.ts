import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  API_DOC,
  committedReference,
  endpointIndex,
  ROOT,
  servedReference,
  withEndpointIndex,
} from '../scripts/export-api-docs.js';

/**
 * The repository stands on its own: the reference in docs/reference/ is what the server serves now, the endpoint
 * index of docs/api.md lists every operation, and README.md and docs/ link only to files inside the repository.
 */

/** README.md and every Markdown file under docs/, relative to the repository. */
function markdownFiles(): string[] {
  const files = ['README.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(ROOT, dir))) {
      const path = `${dir}/${name}`;
      if (statSync(join(ROOT, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) files.push(path);
    }
  };
  walk('docs');
  return files;
}

/** The text outside fenced code blocks (a `# comment` in a shell block is not a heading, a link there is not one). */
function prose(text: string): string {
  let fenced = false;
  return text
    .split('\n')
    .filter((line) => {
      if (line.trimStart().startsWith('```')) fenced = !fenced;
      return !fenced && !line.trimStart().startsWith('```');
    })
    .join('\n');
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

function anchorsOf(file: string): Set<string> {
  const headings = prose(readFileSync(file, 'utf8'))
    .split('\n')
    .filter((l) => /^#{1,6} /.test(l));
  return new Set(headings.map((h) => slug(h.replace(/^#+ /, '').replaceAll('`', ''))));
}

/** Every Markdown link target `[text](target)` outside code, with its line. */
function links(text: string): { target: string; line: number }[] {
  const found: { target: string; line: number }[] = [];
  prose(text)
    .split('\n')
    .forEach((line, i) => {
      for (const m of line.matchAll(/\]\(([^()\s]+)\)/g)) found.push({ target: m[1]!, line: i + 1 });
    });
  return found;
}

describe('the committed API reference', () => {
  it('is what the server serves at /v1/openapi.json and /v1/schemas now (npm run docs:api rewrites it)', async () => {
    const served = await servedReference();
    const stale = committedReference().filter((path) => !served.has(path));
    expect(stale, 'files in docs/reference/ the server no longer serves').toEqual([]);
    for (const [path, body] of served) {
      const file = join(ROOT, path);
      expect(existsSync(file), `${path} is missing`).toBe(true);
      // Parsed: the order of an object's keys (the paths follow the routing order) is not a difference.
      const committed = JSON.parse(readFileSync(file, 'utf8'));
      expect(committed, `${path} differs from what the server serves`).toEqual(JSON.parse(body));
    }
  });

  it('docs/api.md lists every operation the server routes', () => {
    const doc = readFileSync(join(ROOT, API_DOC), 'utf8');
    expect(doc).toContain(endpointIndex());
    expect(withEndpointIndex(doc)).toBe(doc);
  });
});

describe('README.md and docs/ stand on their own', () => {
  const files = markdownFiles();

  it('every relative link resolves to a file inside the repository, and every anchor to a heading', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const { target, line } of links(readFileSync(join(ROOT, file), 'utf8'))) {
        checked++;
        if (/^[a-z]+:/i.test(target)) continue;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const dest = path ? resolve(ROOT, dirname(file), path) : join(ROOT, file);
        const where = `${file}:${line} → ${target}`;
        if (relative(ROOT, dest).startsWith('..')) broken.push(`${where}: outside the repository`);
        else if (!existsSync(dest)) broken.push(`${where}: no such file`);
        else if (anchor && dest.endsWith('.md') && !anchorsOf(dest).has(anchor)) {
          broken.push(`${where}: no such heading`);
        }
      }
    }
    expect(broken).toEqual([]);
    expect(checked, 'links found').toBeGreaterThan(100);
  });

  it('nothing points at ../shared or names the specification files outside the repository', () => {
    const outside: string[] = [];
    for (const file of files) {
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          const outsideTheRepo = line.includes('../shared') || /\b(?:SPEC|DESIGN)\.md\b/.test(line);
          if (outsideTheRepo) outside.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(outside).toEqual([]);
  });

  it('finds the pages it checks', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/api.md', 'docs/architecture.md']));
  });
});
