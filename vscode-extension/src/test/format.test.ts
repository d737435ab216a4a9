import assert from 'node:assert/strict';
import { test } from 'node:test';
import { baseName, formatBytes, formatDuration, parseSince, stateOf, taskLabel } from '../view/format';
import { worker } from '../testkit/fixtures';

test('formatBytes', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1023), '1023 B');
  assert.equal(formatBytes(2150), '2.1 KiB');
  assert.equal(formatBytes(30 * 1024), '30 KiB');
  assert.equal(formatBytes(3.4 * 1024 * 1024), '3.4 MiB');
  assert.equal(formatBytes(-1), '?');
});

test('formatDuration', () => {
  assert.equal(formatDuration(0), '0 s');
  assert.equal(formatDuration(41_900), '41 s');
  assert.equal(formatDuration(185_000), '3 min 05 s');
  assert.equal(formatDuration(2 * 3600_000 + 3 * 60_000), '2 h 03 min');
  assert.equal(formatDuration(-5), '0 s', 'a clock behind the proxy’s reads as now');
});

test('parseSince reads Go times and refuses the zero time', () => {
  assert.equal(parseSince('2026-01-01T12:00:00.123456789Z'), Date.UTC(2026, 0, 1, 12, 0, 0, 123));
  assert.equal(parseSince('2026-01-01T14:00:00+02:00'), Date.UTC(2026, 0, 1, 12));
  assert.equal(parseSince('0001-01-01T00:00:00Z'), undefined);
  assert.equal(parseSince('junk'), undefined);
  assert.equal(parseSince(undefined), undefined);
});

test('baseName, stateOf, taskLabel', () => {
  assert.equal(baseName('/a/b/udf.py'), 'udf.py');
  assert.equal(baseName('C:\\a\\x.py'), 'x.py');
  assert.equal(baseName('x.py'), 'x.py');
  assert.equal(stateOf(worker({ state: undefined, running: false })), 'idle');
  assert.equal(stateOf(worker({ state: 'bogus' as never, running: true })), 'running');
  assert.equal(taskLabel(worker({ partition: 7, stage: 3 })), 'partition 7');
  assert.equal(taskLabel(worker({ partition: 7, stage: 3, attempt: 2 })), 'partition 7 · attempt 2');
});
