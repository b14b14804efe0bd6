import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * Every name a package's entry point exports, values and types alike, sorted:
 * read by TypeScript from the built `dist/index.d.ts`, so a test of it sees
 * exactly what a user's editor offers.
 */
export function publicNames(packageDir: string): string[] {
  const entry = join(packageDir, 'dist', 'index.d.ts');
  const program = ts.createProgram([entry], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    skipLibCheck: true,
  });
  const source = program.getSourceFile(entry);
  const module = source === undefined ? undefined : program.getTypeChecker().getSymbolAtLocation(source);
  if (module === undefined) throw new Error(`${entry}: not built (run the package's build first)`);
  return program
    .getTypeChecker()
    .getExportsOfModule(module)
    .map((symbol) => symbol.name)
    .sort();
}

/** The exports of the package at `packageDir` that its own README.md never shows in code. */
export function exportsMissingFromReadme(packageDir: string): string[] {
  return namesMissingFrom(readFileSync(join(packageDir, 'README.md'), 'utf8'), publicNames(packageDir));
}

/** The names among `names` that the README never shows in code (a code span or a code block). */
export function namesMissingFrom(readme: string, names: readonly string[]): string[] {
  const shown = new Set<string>();
  for (const code of codeIn(readme)) for (const word of code.match(/[A-Za-z_$][\w$]*/g) ?? []) shown.add(word);
  return names.filter((name) => !shown.has(name));
}

function codeIn(markdown: string): string[] {
  const blocks = [...markdown.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((match) => match[1] ?? '');
  const prose = markdown.replace(/^```[^\n]*\n[\s\S]*?^```/gm, '');
  const spans = [...prose.matchAll(/`([^`\n]+)`/g)].map((match) => match[1] ?? '');
  return [...blocks, ...spans];
}
