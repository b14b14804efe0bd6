import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The shared lint rules: recommended JS rules, typescript-eslint's type-checked recommended rules, the
 * strict type-checked rules that catch real bugs here, plus the habits we keep. Type information comes
 * from each file's nearest tsconfig.json (the project service), so a package lints against the built
 * `dist` types of the packages below it (turbo's lint task depends on their build).
 */
export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/.turbo/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        AbortController: 'readonly',
        fetch: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        SharedArrayBuffer: 'readonly',
        Atomics: 'readonly',
      },
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'no-console': 'off',
      // An `async` function without `await` is deliberate here: it keeps a Promise-returning seam (the
      // Ownership calls, test doubles) rejecting, never throwing, when its synchronous body throws.
      '@typescript-eslint/require-await': 'off',
      // Passing a caught reason on (`reject(error)` with `error: unknown`) keeps what was thrown, as a
      // rethrow does; only a new, non-Error reason is refused.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // From strictTypeChecked, the rules that find real bugs: a missing `await` that lets a rejection
      // escape its try/catch, a catch callback trusting its error, a boolean compared with a literal.
      // Not no-unnecessary-condition: TypeScript narrows a flag that a callback flips between awaits
      // (`while (running)`) to a constant, and the public calls check for `undefined` that JS callers pass.
      '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'error',
      '@typescript-eslint/no-unnecessary-boolean-literal-compare': 'error',
      // Numbers, booleans and a nullable value (messages print a missing pid or signal on purpose) read as
      // meant; an object or an `any` in a template is the bug this rule is for.
      '@typescript-eslint/restrict-template-expressions': [
        'error',
        { allowNumber: true, allowBoolean: true, allowNullish: true, allowRegExp: true, allowAny: false },
      ],
    },
  },
  {
    // Tests read the JSON that real processes print and match it with vitest's asymmetric matchers
    // (`expect.any(String)`), both typed `any` by design; the assertions check those shapes at run time.
    files: ['**/*.test.ts', '**/test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // Plain JS (process fixtures, tooling scripts) is in no tsconfig: lint it without type information.
    files: ['**/*.{js,mjs,cjs}'],
    ...tseslint.configs.disableTypeChecked,
  },
);
