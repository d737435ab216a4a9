// Quoting of argument vectors for the shell of a terminal. The extension
// types a command line into a terminal (so the user sees it and can run it
// again), and the job's arguments come from launch.json: an argument with
// a space, a quote, `$` or `;` must reach spark-submit as one argument,
// unchanged, and never run as shell code.

/** Words that never need quoting in POSIX sh. */
const SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * Words PowerShell passes through unquoted: no comma (array operator), no
 * leading @ (splatting) or - (which it may read as an operator), no $ or `.
 */
const PS_SAFE = /^[A-Za-z0-9_.:/\\+=][A-Za-z0-9_.:/\\+=-]*$/;

/**
 * Quotes one argument for a POSIX shell (sh, bash, zsh). Inside single
 * quotes nothing is special there, so only the single quote itself needs
 * care: close the quotes, add an escaped quote, reopen. fish also reads
 * \' and \\ inside single quotes as escapes, so a backslash is written the
 * same way as a quote, outside the quotes, where both shells read \\ as one
 * backslash.
 */
export function quotePosix(arg: string): string {
  if (arg === '') {
    return "''";
  }
  if (SAFE.test(arg)) {
    return arg;
  }
  return "'" + arg.replace(/['\\]/g, (c) => "'\\" + c + "'") + "'";
}

/**
 * Quotes one argument for PowerShell, the default shell of VS Code's
 * terminal on Windows: inside single quotes only the single quote is
 * special, written twice (PowerShell also treats the typographic quotes
 * ‘ ’ ‚ ‛ as single quotes, so they are doubled too).
 */
export function quotePowerShell(arg: string): string {
  if (arg === '') {
    return "''";
  }
  if (PS_SAFE.test(arg)) {
    return arg;
  }
  return "'" + arg.replace(/['\u2018\u2019\u201a\u201b]/g, (q) => q + q) + "'";
}

export type ShellKind = 'posix' | 'powershell';

/** The shell a terminal most likely runs on this platform. */
export function defaultShellKind(platform: string): ShellKind {
  return platform === 'win32' ? 'powershell' : 'posix';
}

/**
 * A command line that runs argv[0] with the other arguments exactly as
 * given. PowerShell needs the call operator `&` before a quoted program.
 */
export function commandLine(argv: readonly string[], kind: ShellKind = 'posix'): string {
  if (argv.length === 0) {
    throw new Error('commandLine: empty argv');
  }
  if (kind === 'powershell') {
    return '& ' + argv.map(quotePowerShell).join(' ');
  }
  return argv.map(quotePosix).join(' ');
}
