/**
 * Top self-time functions of V8 CPU profiles (as written by `npm run bench -- --cpu-prof`):
 *   npx tsx bench/profile-top.ts bench/results/profiles/<file>.cpuprofile [more...] [--top 25]
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function where(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url ? relative(process.cwd(), url.replace(/^file:\/\//, '')) : '';
  return `${functionName || '(anonymous)'}${file ? `  ${file}:${lineNumber + 1}` : ''}`;
}

function topSelf(path: string, top: number): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (!node) return;
    total += us;
    const key = where(node);
    self.set(key, (self.get(key) ?? 0) + us);
  });
  const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top);
  const lines = rows.map(
    ([k, us]) =>
      `${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(1).padStart(8)} ms  ${k}`,
  );
  return [`${path}: ${(total / 1000).toFixed(0)} ms sampled`, ...lines].join('\n');
}

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 25;
if (args.length === 0) {
  process.stderr.write('usage: tsx bench/profile-top.ts <file.cpuprofile>... [--top N]\n');
  process.exit(2);
}
for (const file of args) process.stdout.write(`${topSelf(file, top)}\n\n`);
