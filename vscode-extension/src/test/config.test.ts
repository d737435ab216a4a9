import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
  attachConfig,
  ConfigError,
  defaultConfiguration,
  printedSubmitLine,
  readRootSettings,
  sessionKind,
  submitArgv,
  submitEnv,
} from '../config';
import { connectKey, isWatchableRoot, newToken, resolveConfiguration } from '../resolve';
import { replayArgv, replayConfig } from '../replay';
import type { ServeOptions, Tokens } from '../serve';
import { commandLine } from '../shellquote';

describe('sessionKind', () => {
  test('tells roots, attaches, children and replays apart', () => {
    assert.equal(sessionKind({ type: 'sparkdap', request: 'attach' }), 'root');
    assert.equal(sessionKind({ type: 'sparkdap', connect: { port: 4711 } }), 'attach');
    assert.equal(sessionKind({ type: 'sparkdap', connect: { port: 4711 }, sparkdapExecutor: 3, sparkdapChildKey: 'k' }), 'child');
    assert.equal(sessionKind({ type: 'sparkdap', connect: { port: 1 }, sparkdapReplay: true }), 'replay');
    assert.equal(sessionKind({ type: 'sparkdap' }, true), 'child');
  });
});

describe('readRootSettings', () => {
  test('defaults: sparkdap on PATH, the workspace folder, free loopback ports', () => {
    assert.deepEqual(readRootSettings({}, '/ws'), {
      sparkdapPath: 'sparkdap',
      root: '/ws',
      ide: '127.0.0.1:0',
      executors: '127.0.0.1:0',
      serveArgs: [],
    });
    assert.equal(readRootSettings({}, '/ws', '/opt/sparkdap').sparkdapPath, '/opt/sparkdap');
  });

  test('reads submit', () => {
    const s = readRootSettings(
      { submit: { args: ['--master', 'local[2]', 'main.py'], partitions: [1, 2], stages: 3, python: '/venv/bin/python', flags: ['--post-mortem'] } },
      '/ws',
    );
    assert.deepEqual(s.submit, {
      args: ['--master', 'local[2]', 'main.py'],
      partitions: '1,2',
      stages: '3',
      python: '/venv/bin/python',
      proxy: undefined,
      flags: ['--post-mortem'],
    });
    assert.equal(readRootSettings({ submit: { args: ['a.py'], partitions: 'none' } }, '/ws').submit?.partitions, 'none');
    assert.equal(readRootSettings({ submit: { args: ['a.py'], partitions: '1, 2' } }, '/ws').submit?.partitions, '1,2');
  });

  test('refuses what cannot work, saying why', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ide: 'localhost' }, /"ide": "localhost" is not HOST:PORT/],
      [{ executors: 5678 }, /"executors" must be a string/],
      [{ serveArgs: '--merged' }, /"serveArgs" must be an array of strings/],
      [{ serveArgs: ['--token', 'x'] }, /must not set --token/],
      [{ serveArgs: ['--ide-token=x'] }, /must not set --ide-token/],
      [{ serveArgs: ['-ready-file', 'x'] }, /must not set -ready-file/],
      [{ submit: ['main.py'] }, /"submit" must be an object/],
      [{ submit: {} }, /"submit.args" must list/],
      [{ submit: { args: ['a.py'], partitions: 'some' } }, /"submit.partitions" must be ids/],
      [{ submit: { args: ['a.py'], stages: [-1] } }, /"submit.stages" must be ids/],
    ];
    for (const [c, re] of bad) {
      assert.throws(() => readRootSettings(c, '/ws'), (e: Error) => e instanceof ConfigError && re.test(e.message), JSON.stringify(c));
    }
    assert.throws(() => readRootSettings({}, undefined), /no workspace folder/);
  });
});

describe('attachConfig', () => {
  test('connect and the IDE token set; the extension’s keys left out; the rest kept', () => {
    const c = attachConfig(
      {
        type: 'sparkdap', request: 'attach', name: 'n', root: '/ws', sparkdapPath: 'x', ide: '127.0.0.1:0', executors: '127.0.0.1:0',
        submit: { args: ['a.py'] }, serveArgs: [], justMyCode: false, pathMappings: [{ localRoot: '/a', remoteRoot: '/b' }],
      },
      { host: '127.0.0.1', port: 41234 },
      'T',
    );
    assert.deepEqual(c, {
      type: 'sparkdap', request: 'attach', name: 'n', justMyCode: false, pathMappings: [{ localRoot: '/a', remoteRoot: '/b' }],
      connect: { host: '127.0.0.1', port: 41234 }, sparkdapToken: 'T',
    });
  });
});

describe('submit', () => {
  const sub = { args: ['--master', 'local[2]', '--name', "Bob's job", 'my app.py', '--in', '$HOME/x'], partitions: '1,2', stages: undefined, python: '/venv/bin/python', proxy: undefined, flags: ['--wait'] };

  test('argv: flags, --, then spark-submit’s arguments unchanged', () => {
    assert.deepEqual(submitArgv('/opt/sparkdap', sub, '127.0.0.1:41235'), [
      '/opt/sparkdap', 'submit', '--proxy', '127.0.0.1:41235', '--partitions', '1,2', '--wait', '--',
      '--master', 'local[2]', '--name', "Bob's job", 'my app.py', '--in', '$HOME/x',
    ]);
    assert.equal(submitArgv('s', { ...sub, proxy: 'edge:5678' }, '127.0.0.1:1')[3], 'edge:5678');
  });

  test('the command line a shell runs gives submit exactly that argv', () => {
    const argv = submitArgv('/opt/spark dap/sparkdap', sub, '127.0.0.1:41235');
    const line = commandLine(argv);
    assert.equal(
      line,
      "'/opt/spark dap/sparkdap' submit --proxy 127.0.0.1:41235 --partitions 1,2 --wait -- --master 'local[2]' --name 'Bob'\\''s job' 'my app.py' --in '$HOME/x'",
    );
    const out = execFileSync('/bin/sh', ['-c', commandLine(['printf', '%s\\0', ...argv])], { encoding: 'utf8' });
    assert.deepEqual(out.split('\0').slice(0, -1), argv);
  });

  test('env: the executors’ token and the job’s Python; nothing else', () => {
    assert.deepEqual(submitEnv('tok', sub), { SPARKDAP_TOKEN: 'tok', PYSPARK_PYTHON: '/venv/bin/python' });
    assert.deepEqual(submitEnv('tok', undefined), { SPARKDAP_TOKEN: 'tok' });
  });

  test('the printed line reads the token from its file and shows no secret', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sparkdap test '));
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, 'sekrit\n');
    const line = printedSubmitLine('sparkdap', '127.0.0.1:5678', tokenFile);
    assert.ok(!line.includes('sekrit'));
    assert.match(line, /^SPARKDAP_TOKEN="\$\(cat '.*sparkdap test .*\/token'\)" sparkdap submit --proxy 127\.0\.0\.1:5678 -- --master 'local\[2\]' main\.py$/);
    // Run with printf standing in for sparkdap: the token reaches its environment.
    const probe = printedSubmitLine('sh', '127.0.0.1:5678', tokenFile, 'posix', []).replace(/ sh submit .*/, ' sh -c \'printf %s "$SPARKDAP_TOKEN"\'');
    assert.equal(execFileSync('/bin/sh', ['-c', probe], { encoding: 'utf8' }), 'sekrit');
    assert.match(printedSubmitLine('sparkdap', '127.0.0.1:5678', 'C:\\t\\token', 'powershell'), /^\$env:SPARKDAP_TOKEN = \(Get-Content C:\\t\\token\); & sparkdap submit/);
  });
});

describe('resolveConfiguration', () => {
  function fakeLaunch() {
    const calls: { o: ServeOptions; t: Tokens }[] = [];
    return {
      calls,
      launch: async (o: ServeOptions, t: Tokens) => {
        calls.push({ o, t });
        return { ide: { host: '127.0.0.1', port: 41234 }, executors: '127.0.0.1:41235' };
      },
    };
  }

  test('a root starts serve with fresh tokens and attaches to it', async () => {
    const f = fakeLaunch();
    let n = 0;
    const r = await resolveConfiguration(
      { type: 'sparkdap', request: 'attach', name: 'job', root: '/ws/job', serveArgs: ['--merged'], submit: { args: ['a.py'] } },
      '/ws',
      { launch: f.launch, newToken: () => `token${++n}` },
    );
    assert.equal(r.kind, 'root');
    assert.deepEqual(f.calls[0].o, { sparkdapPath: 'sparkdap', root: '/ws/job', ide: '127.0.0.1:0', executors: '127.0.0.1:0', serveArgs: ['--merged'] });
    assert.deepEqual(f.calls[0].t, { executors: 'token1', ide: 'token2' });
    assert.deepEqual(r.config, { type: 'sparkdap', request: 'attach', name: 'job', connect: { host: '127.0.0.1', port: 41234 }, sparkdapToken: 'token2' });
    assert.equal(r.settings?.submit?.args[0], 'a.py');
    assert.deepEqual(r.tokens, { executors: 'token1', ide: 'token2' });
  });

  test('children, replays and attaches to a user’s serve start nothing', async () => {
    const f = fakeLaunch();
    const child = { type: 'sparkdap', request: 'attach', name: 'p7 · s3', connect: { host: '127.0.0.1', port: 41234 }, sparkdapExecutor: 7, sparkdapChildKey: 'k', sparkdapToken: 'T' };
    assert.deepEqual((await resolveConfiguration(child, '/ws', { launch: f.launch })).config, child);
    const replay = replayConfig('parse (stage 3 · partition 7)', '127.0.0.1', 5679);
    const rr = await resolveConfiguration(replay, '/ws', { launch: f.launch });
    assert.equal(rr.kind, 'replay');
    assert.deepEqual(rr.config, replay);
    const attach = { type: 'sparkdap', request: 'attach', name: 'mine', connect: { port: '4711' } };
    assert.equal((await resolveConfiguration(attach, '/ws', { launch: f.launch })).kind, 'attach');
    assert.equal(f.calls.length, 0);
    await assert.rejects(resolveConfiguration({ type: 'sparkdap', connect: { port: 0 } }, '/ws', { launch: f.launch }), /"connect" must be/);
  });

  test('a bad root configuration starts nothing', async () => {
    const f = fakeLaunch();
    await assert.rejects(resolveConfiguration({ type: 'sparkdap', serveArgs: ['--token', 'x'] }, '/ws', { launch: f.launch }), ConfigError);
    assert.equal(f.calls.length, 0);
  });

  test('tokens are 256 random bits, hex', () => {
    const a = newToken();
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, newToken());
  });
});

describe('which roots the view follows', () => {
  test('sparkdap roots and debugpy attaches; never children', () => {
    assert.equal(isWatchableRoot('sparkdap', { connect: { port: 1 }, sparkdapToken: 't' }, false), true);
    assert.equal(isWatchableRoot('sparkdap', { connect: { port: 1 }, sparkdapExecutor: 2 }, false), false);
    assert.equal(isWatchableRoot('sparkdap', { connect: { port: 1 } }, true), false);
    assert.equal(isWatchableRoot('sparkdap', replayConfig('x', 'h', 1), false), false);
    assert.equal(isWatchableRoot('debugpy', { request: 'attach', connect: { host: '127.0.0.1', port: 4711 } }, false), true);
    assert.equal(isWatchableRoot('debugpy', { request: 'launch', program: 'a.py' }, false), false);
    assert.equal(isWatchableRoot('debugpy', { request: 'attach', processId: 12 }, false), false);
    assert.equal(isWatchableRoot('node', { request: 'attach', port: 9229 }, false), false);
  });

  test('connectKey', () => {
    assert.equal(connectKey({ connect: { host: '127.0.0.1', port: 41234 } }), '127.0.0.1:41234');
    assert.equal(connectKey({ connect: { port: 4711 } }), '127.0.0.1:4711');
    assert.equal(connectKey({}), undefined);
  });
});

test('replay argv and the default configuration', () => {
  assert.deepEqual(replayArgv('sparkdap', '127.0.0.1', 5679, '/c/parse.json', '/venv/bin/python'), [
    'sparkdap', 'replay', '--debug', '127.0.0.1:5679', '--python', '/venv/bin/python', '/c/parse.json',
  ]);
  assert.deepEqual(replayArgv('sparkdap', '127.0.0.1', 5679, '/c/p.json'), ['sparkdap', 'replay', '--debug', '127.0.0.1:5679', '/c/p.json']);
  assert.equal(sessionKind(defaultConfiguration()), 'root');
});
