import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';

/** The info string that marks a README's one runnable example: GitHub still shows it as TypeScript. */
export const EXAMPLE_INFO = 'ts example';

/** The TypeScript of the one "```ts example" block of a README, exactly as printed there. */
export function readmeExample(readmePath: string): string {
  const blocks = codeBlocks(readFileSync(readmePath, 'utf8'), EXAMPLE_INFO);
  if (blocks.length !== 1)
    throw new Error(`${readmePath}: wants exactly one \`\`\`${EXAMPLE_INFO} block, found ${blocks.length}`);
  return blocks[0] ?? '';
}

/** Each code block of `markdown` fenced with the info string `info` (```` ```sh ````), exactly as printed. */
export function codeBlocks(markdown: string, info: string): string[] {
  return [...markdown.matchAll(new RegExp(`^\`\`\`${info}\n([\\s\\S]*?)^\`\`\`$`, 'gm'))].map(
    (match) => match[1] ?? '',
  );
}

/**
 * The section of `markdown` under the heading line `heading` (`## A short tour`), up to the next
 * `## ` heading. Throws when there is no such heading.
 */
export function markdownSection(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`no section ${heading}`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

/** The example as the JavaScript module a user's TypeScript build would emit (types erased, ESM kept). */
export function exampleAsModule(source: string): string {
  return ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
  }).outputText;
}

export interface ExampleRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ExampleOptions {
  /** The package folder (its package.json names it); the example may import that package only. */
  readonly packageDir: string;
  /** The example's working folder; the example runs from a temp folder of its own when omitted. */
  readonly cwd?: string;
  /** Variables added to this process's environment for the example. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Runs a package's README example with `node`, as a user who installed that
 * one package would: from a temp folder whose only dependency is the package
 * itself, so an example that imports a layer it does not re-export fails
 * with `ERR_MODULE_NOT_FOUND` here, as it would under pnpm's strict layout.
 */
export async function runReadmeExample(options: ExampleOptions): Promise<ExampleRun> {
  const { name } = JSON.parse(readFileSync(join(options.packageDir, 'package.json'), 'utf8')) as { name: string };
  const folder = realpathSync(mkdtempSync(join(tmpdir(), 'leasehold-readme-example-')));
  try {
    const link = join(folder, 'node_modules', name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(realpathSync(options.packageDir), link);
    const script = join(folder, 'example.mjs');
    writeFileSync(script, exampleAsModule(readmeExample(join(options.packageDir, 'README.md'))));
    return await runNode(script, options.cwd ?? folder, { ...process.env, ...options.env });
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

function runNode(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<ExampleRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
