import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { describe, test } from 'node:test';
import { commandLine, defaultShellKind, quotePosix, quotePowerShell } from '../shellquote';

const tricky = [
  'plain',
  '',
  'with space',
  "it's",
  '"double"',
  `both ' and "`,
  '$HOME',
  '`id`',
  '$(id)',
  'a;b',
  'a&&b',
  'back\\slash',
  'trailing\\',
  "\\'",
  'new\nline',
  'tab\there',
  '*.py',
  '~',
  '--conf=spark.executorEnv.X=a b',
  'local[2]',
  'ünïcödé ✓',
  '!bang',
  '#hash',
];

describe('quotePosix', () => {
  test('leaves safe words alone', () => {
    assert.equal(quotePosix('--master'), '--master');
    assert.equal(quotePosix('/opt/spark/bin/spark-submit'), '/opt/spark/bin/spark-submit');
    assert.equal(quotePosix('spark.x=1,2'), 'spark.x=1,2');
  });

  test('quotes the rest', () => {
    assert.equal(quotePosix(''), "''");
    assert.equal(quotePosix('with space'), "'with space'");
    assert.equal(quotePosix("it's"), "'it'\\''s'");
    assert.equal(quotePosix('local[2]'), "'local[2]'");
    assert.equal(quotePosix('a\\b'), "'a'\\\\'b'");
  });

  for (const shell of ['/bin/sh', '/bin/bash', '/usr/bin/dash', '/usr/bin/zsh', '/usr/bin/fish']) {
    test(`${shell} reads every argument back unchanged`, { skip: !fs.existsSync(shell) }, () => {
      // printf repeats its format for each argument: one NUL-terminated
      // field per argument that reached it.
      const line = commandLine(['printf', '%s\\0', ...tricky]);
      const out = execFileSync(shell, ['-c', line], { encoding: 'utf8', env: { HOME: '/home/x', PATH: process.env.PATH } });
      assert.deepEqual(out.split('\0').slice(0, -1), tricky);
    });
  }
});

describe('quotePowerShell', () => {
  test('doubles single quotes (typographic ones too) inside single quotes', () => {
    assert.equal(quotePowerShell('plain'), 'plain');
    assert.equal(quotePowerShell("it's"), "'it''s'");
    assert.equal(quotePowerShell('a\u2019b'), "'a\u2019\u2019b'");
    assert.equal(quotePowerShell('$env:X'), "'$env:X'");
    assert.equal(quotePowerShell('--master'), "'--master'", 'a leading dash could be read as an operator');
    assert.equal(quotePowerShell(''), "''");
  });

  test('commandLine uses the call operator', () => {
    assert.equal(commandLine(['C:\\Program Files\\sparkdap.exe', 'submit'], 'powershell'), "& 'C:\\Program Files\\sparkdap.exe' submit");
  });
});

test('defaultShellKind', () => {
  assert.equal(defaultShellKind('win32'), 'powershell');
  assert.equal(defaultShellKind('linux'), 'posix');
  assert.throws(() => commandLine([]));
});
