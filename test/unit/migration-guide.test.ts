/**
 * docs/migrating-from-bullmq.md: every ```ts snippet compiles against Surety's source (`surety` is
 * mapped to src/index.ts), and every relative link of the guide resolves. BullMQ snippets are fenced
 * ```ts bullmq and skipped. The snippets are compiled in memory: nothing is written.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const GUIDE = 'docs/migrating-from-bullmq.md';

interface Snippet {
  /** The markdown file, relative to the root (for messages). */
  doc: string;
  /** The doc's line (1-based) of the snippet's first line of code. */
  line: number;
  code: string;
}

/** The ```ts (or ```typescript) blocks of `markdown`, except those whose info string says bullmq. */
function tsSnippets(doc: string, markdown: string): Snippet[] {
  const snippets: Snippet[] = [];
  let open: { fence: string; info: string; line: number; body: string[] } | null = null;
  for (const [i, text] of markdown.split('\n').entries()) {
    const fence = /^\s*(`{3,}|~{3,})\s*(.*)$/.exec(text);
    if (open === null) {
      if (fence) open = { fence: fence[1]!, info: fence[2]!.trim(), line: i + 2, body: [] };
    } else if (fence && fence[1]!.startsWith(open.fence) && fence[2]!.trim() === '') {
      const words = open.info.split(/\s+/);
      if (['ts', 'typescript'].includes(words[0]!) && !words.includes('bullmq')) {
        snippets.push({ doc, line: open.line, code: open.body.join('\n') });
      }
      open = null;
    } else {
      open.body.push(text);
    }
  }
  if (open !== null) throw new Error(`${doc}: a code block is not closed`);
  return snippets;
}

/**
 * Type-checks the snippets as ES modules of this package (tsconfig.json's options), each in its own
 * file, with `surety`, `surety/testing`, `surety/dashboard` and `surety/migrate` mapped to src/. Returns one message per
 * error, `doc:line:column TScode message`, with the doc's line.
 */
function typeCheck(snippets: Snippet[]): { errors: string[]; program: ts.Program } {
  const config = ts.readConfigFile(join(root, 'tsconfig.json'), ts.sys.readFile);
  if (config.error) throw new Error(ts.flattenDiagnosticMessageText(config.error.messageText, '\n'));
  const { options } = ts.convertCompilerOptionsFromJson(config.config.compilerOptions, root);
  Object.assign(options, {
    noEmit: true,
    declaration: false,
    sourceMap: false,
    moduleDetection: ts.ModuleDetectionKind.Force,
    typeRoots: [join(root, 'node_modules/@types')],
    // Absolute targets: no baseUrl needed.
    paths: {
      surety: [join(root, 'src/index.ts')],
      'surety/testing': [join(root, 'src/testing/index.ts')],
      'surety/dashboard': [join(root, 'src/dashboard/index.ts')],
      'surety/migrate': [join(root, 'src/migrate/index.ts')],
    },
  } satisfies ts.CompilerOptions);
  // Beside the guide, so the root package.json ("type": "module") makes them ES modules.
  const fileOf = (s: Snippet) => join(root, dirname(s.doc), `.snippet-line-${s.line}.ts`);
  const files = new Map(snippets.map((s) => [fileOf(s), s]));
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, onError, shouldCreate) => {
    const s = files.get(fileName);
    return s
      ? ts.createSourceFile(fileName, s.code, language, true)
      : getSourceFile(fileName, language, onError, shouldCreate);
  };
  host.fileExists = (f) => files.has(f) || ts.sys.fileExists(f);
  host.readFile = (f) => files.get(f)?.code ?? ts.sys.readFile(f);
  host.writeFile = () => {
    throw new Error('the snippet check must write nothing');
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const errors: string[] = [];
  for (const [file, s] of files) {
    const sf = program.getSourceFile(file)!;
    for (const d of [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)]) {
      const { line, character } = sf.getLineAndCharacterOfPosition(d.start ?? 0);
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      errors.push(`${s.doc}:${s.line + line}:${character + 1} TS${d.code} ${text}`);
    }
  }
  return { errors, program };
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a markdown file's headings (outside code blocks), duplicates numbered as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let inCode = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) inCode = !inCode;
    const h = inCode ? null : /^#{1,6}\s+(.*)$/.exec(line);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative links of `doc` (outside code) whose file or anchor does not exist. */
function brokenLinks(doc: string): string[] {
  const markdown = readFileSync(join(root, doc), 'utf8');
  const prose = markdown.replace(/^\s*(```|~~~)[^\n]*\n[\s\S]*?^\s*\1\s*$/gm, '').replace(/`[^`\n]*`/g, '');
  const broken: string[] = [];
  for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // https:, mailto:
    const [path, anchor] = target.split('#') as [string, string | undefined];
    const file = path === '' ? join(root, doc) : join(root, dirname(doc), path);
    if (!existsSync(file)) broken.push(`${target}: no such file`);
    else if (anchor !== undefined && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor))
      broken.push(`${target}: no such heading`);
  }
  return broken;
}

describe(GUIDE, () => {
  const guide = readFileSync(join(root, GUIDE), 'utf8');
  const snippets = tsSnippets(GUIDE, guide);
  // One program for the guide and the self-check below: building it is most of the cost.
  const broken: Snippet = {
    doc: 'self-check.md',
    line: 7,
    code: "import { Queue } from 'surety';\nawait new Queue('q').add({}, { attempts: 3 });",
  };
  let checked: { errors: string[]; program: ts.Program } | undefined;
  const check = () => {
    checked ??= typeCheck([...snippets, broken]);
    return checked;
  };

  it('has Surety snippets to check, and fences its BullMQ ones as ts bullmq', () => {
    expect(snippets.length).toBeGreaterThanOrEqual(6);
    expect(snippets.filter((s) => /from ['"]bullmq['"]/.test(s.code)).map((s) => s.line)).toEqual([]);
    expect(guide.match(/^```ts bullmq$/gm)?.length ?? 0).toBeGreaterThanOrEqual(5);
  });

  it('every ts snippet compiles against src/', () => {
    const { errors, program } = check();
    // `surety` resolved to the source, not to a built dist/.
    expect(program.getSourceFile(join(root, 'src/index.ts'))).toBeDefined();
    expect(errors.filter((e) => e.startsWith(`${GUIDE}:`))).toEqual([]);
  });

  it('reports a snippet error at its line in the doc', () => {
    const own = check().errors.filter((e) => e.startsWith('self-check.md:'));
    expect(own).toHaveLength(1);
    expect(own[0]).toMatch(/^self-check\.md:8:\d+ TS2353 .*'attempts'/);
  });

  it('every relative link resolves, anchors included', () => {
    expect(brokenLinks(GUIDE)).toEqual([]);
    expect(readFileSync(join(root, 'README.md'), 'utf8')).toContain(`](${GUIDE})`);
  });
});
