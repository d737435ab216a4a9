// Replaying a captured call under the debugger: `sparkdap replay --debug`
// in a terminal, and the debug configuration that attaches to it.

import * as net from 'node:net';
import type { Config } from './config';
import { REPLAY_ARG } from './protocol';

/** A free TCP port on host, as the kernel gives one to a listener on port 0. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const a = srv.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      srv.close(() => (port ? resolve(port) : reject(new Error('no port'))));
    });
  });
}

export function replayArgv(sparkdapPath: string, host: string, port: number, capture: string, python?: string): string[] {
  const argv = [sparkdapPath, 'replay', '--debug', `${host}:${port}`];
  if (python) {
    argv.push('--python', python);
  }
  argv.push(capture);
  return argv;
}

/**
 * The session attaching to replay's debugpy. sparkdapReplay tells the
 * configuration provider not to start serve, and the adapter factory to
 * connect with retries. justMyCode: the replay steps through the user's
 * function, not the harness that unpickles its arguments.
 */
export function replayConfig(label: string, host: string, port: number): Config {
  return {
    type: 'sparkdap',
    request: 'attach',
    name: `replay ${label}`,
    connect: { host, port },
    [REPLAY_ARG]: true,
    justMyCode: true,
  };
}
