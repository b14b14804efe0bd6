import type { FindingRemedy, ProcessGone } from '@leasehold/recovery';
import { fileSystemRemedy, placeOptions, shellQuote } from '@leasehold/contracts';

/** `leasehold doctor` for `stateHome`: what a person runs again once a file is repaired or a writer is done. */
function doctorAgain(stateHome: string): string {
  return `leasehold doctor --state-home ${shellQuote(stateHome)}`;
}

/** `command`, after the proviso that a process this host cannot tell is gone, and where to run it then. */
function onceGone(processGone: ProcessGone | undefined, command: string): string {
  if (processGone === undefined) return command;
  const { pid, host, runFrom } = processGone;
  // A lock of the state home: the problem names the process, and the command runs here.
  if (runFrom === 'here') return `make sure that process is gone, then: ${command}`;
  const where =
    runFrom === 'its-pid-namespace' ? 'from inside the PID namespace (the container) it ran in' : `on ${host}`;
  return `make sure pid ${pid} on ${host} is gone, then, ${where}: ${command}`;
}

/**
 * The line `doctor` prints for a remedy of `diagnose`: the command to run, after the proviso a
 * person must check first when there is one, every path shell-quoted so that it can be pasted.
 */
export function findingRemedyLine(remedy: FindingRemedy): string {
  switch (remedy.kind) {
    case 'remove':
      return onceGone(remedy.processGone, `rm ${remedy.recursive ? '-r ' : ''}${shellQuote(remedy.path)}`);
    case 'chmod':
      return `chmod ${remedy.mode.toString(8)} ${shellQuote(remedy.path)}`;
    case 'chown':
      return `${remedy.asRoot ? 'as root: ' : ''}chown ${remedy.uid} ${shellQuote(remedy.path)}`;
    case 'own-state-home':
      return `it is the state home of uid ${remedy.uid}: run as that user, or use a state home of your own`;
    case 'repair':
      return `repair or restore ${shellQuote(remedy.path)} by hand (Leasehold never rewrites a file it cannot read), then: ${doctorAgain(remedy.stateHome)}`;
    case 'wait-for-writer':
      return `wait for that writer, then run again: ${doctorAgain(remedy.stateHome)}`;
    case 'recover':
      return onceGone(remedy.processGone, `leasehold recover ${placeOptions(remedy.workspace, remedy.stateHome)}`);
    case 'file-system':
      return fileSystemRemedy(remedy.stateHome, remedy.allowAs, 'state home');
    case 'stop':
      return `leasehold stop ${placeOptions(remedy.workspace, remedy.stateHome)}`;
  }
}
