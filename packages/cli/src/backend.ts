import { openStateHome, type OpenBackend } from '@leasehold/state-home';
import { assertAccess } from './access.js';
import { stateHomeOf, type CommandContext } from './context.js';

/**
 * The state home of a command line, opened on the backend it records (`openStateHome` of
 * `@leasehold/state-home`), once this user is known to be allowed to use it (`creates`: the
 * command makes it when it is missing).
 * @throws ContractError `refused` with the path and a remedy about permissions when it is not;
 * what `openStateHome` throws otherwise (its `StateHomeError` gets its command-line remedy in `problemOf`).
 */
export async function openBackend(
  context: CommandContext,
  { ttlSeconds, creates = false }: { ttlSeconds?: number | undefined; creates?: boolean } = {},
): Promise<OpenBackend> {
  const stateHome = stateHomeOf(context);
  assertAccess(stateHome, creates);
  return openStateHome(stateHome, { env: context.env, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) });
}

/** Runs `use` on the state home's backend (or the one `opening` opens), and closes it whatever happens. */
export async function withBackend<T>(
  context: CommandContext,
  use: (opened: OpenBackend) => Promise<T>,
  opening: OpenBackend | Promise<OpenBackend> = openBackend(context),
): Promise<T> {
  const opened = await opening;
  try {
    return await use(opened);
  } finally {
    await opened.close();
  }
}
