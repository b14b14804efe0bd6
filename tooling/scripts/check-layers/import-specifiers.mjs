// Finding the modules a source file loads, with TypeScript's own parser: the layer check
// (../check-layers.mjs) judges each one, so none may be missed and none invented from a
// comment or a string.
import ts from 'typescript';

// Only these calls load a module by name; `x.from('a')` or `s.import('b')` do not.
const loadingCalls = new Set([
  'import',
  'require',
  'require.resolve',
  'import.meta.resolve',
  'vi.mock',
  'vi.doMock',
  'vi.importActual',
  'vi.importMock',
]);

/**
 * The module specifiers a JavaScript or TypeScript source loads: `import` and
 * `export ... from`, bare `import 'x'`, `import type`, `import x = require('x')`,
 * `typeof import('x')`, `import('x')`, `require('x')` and a few resolver
 * calls. TypeScript's own parser reads the file, so a commented-out import, or
 * one inside a string, regular expression or template, is not one. It walks
 * the syntax tree because `ts.preProcessFile` misses the resolver and mock calls.
 * Specifiers built at run time (`import(variable)`, templates with `${}`)
 * cannot be seen.
 * @param {string} source
 * @param {string} [fileName] picks the syntax (`.tsx` and `.jsx` allow JSX)
 * @returns {{ specifier: string, line: number }[]}
 */
export function findImportSpecifiers(source, fileName = 'source.ts') {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const found = [];
  const visit = (node) => {
    const literal = loadedLiteral(node);
    if (literal !== undefined) {
      const { line } = file.getLineAndCharacterOfPosition(literal.getStart(file));
      found.push({ specifier: literal.text, line: line + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

/** The string literal naming the module `node` loads, if it loads one. */
function loadedLiteral(node) {
  let literal;
  if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal = node.moduleSpecifier;
  else if (ts.isExternalModuleReference(node)) literal = node.expression;
  else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal = node.argument.literal;
  else if (ts.isCallExpression(node) && loadingCalls.has(calleeName(node.expression))) literal = node.arguments[0];
  return literal !== undefined && ts.isStringLiteralLike(literal) ? literal : undefined;
}

/** The dotted name of a callee, e.g. `require.resolve`; undefined when it is not a plain name. */
function calleeName(expression) {
  if (expression.kind === ts.SyntaxKind.ImportKeyword) return 'import';
  if (ts.isIdentifier(expression)) return expression.text;
  if (ts.isMetaProperty(expression)) return `${ts.tokenToString(expression.keywordToken)}.${expression.name.text}`;
  if (ts.isPropertyAccessExpression(expression) && ts.isIdentifier(expression.name)) {
    const object = calleeName(expression.expression);
    return object === undefined ? undefined : `${object}.${expression.name.text}`;
  }
  return undefined;
}
