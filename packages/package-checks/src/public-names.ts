import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/** One name a package's entry point exports, and where it is declared (`file#name`, through every re-export). */
export interface PublicDeclaration {
  readonly name: string;
  readonly declaredAt: string;
}

/**
 * Every name a package's entry point exports, with the declaration it stands for: two packages
 * that export one name for one declaration re-export it; for two declarations, they collide.
 */
export function publicDeclarations(packageDir: string): PublicDeclaration[] {
  const { checker, exports } = entryExports(packageDir);
  return exports.map((symbol) => {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const declaration = target.declarations?.[0];
    const file = declaration === undefined ? '?' : realpathSync(declaration.getSourceFile().fileName);
    return { name: symbol.name, declaredAt: `${file}#${target.name}` };
  });
}

/**
 * Every name a package's entry point exports, values and types alike, sorted:
 * read by TypeScript from the built `dist/index.d.ts`, so a test of it sees
 * exactly what a user's editor offers.
 */
export function publicNames(packageDir: string): string[] {
  return entryExports(packageDir)
    .exports.map((symbol) => symbol.name)
    .sort();
}

/** The symbols `dist/index.d.ts` exports, with the checker that reads them. */
function entryExports(packageDir: string): { checker: ts.TypeChecker; exports: ts.Symbol[] } {
  const entry = join(packageDir, 'dist', 'index.d.ts');
  const program = ts.createProgram([entry], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
  if (module === undefined) throw new Error(`${entry}: not built (run the package's build first)`);
  return { checker, exports: checker.getExportsOfModule(module) };
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
