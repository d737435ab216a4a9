import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONDITION_FIELDS, shouldOffer } from '../conditions/items';

test('the task fields the wrapper defines', () => {
  assert.deepEqual(
    CONDITION_FIELDS.map((f) => f.name),
    ['sparkdap.partition', 'sparkdap.stage', 'sparkdap.attempt', 'sparkdap.executor', 'sparkdap.task_attempt_id'],
  );
});

test('offered where the breakpoint widget asks: column 1 of a line with code', () => {
  assert.equal(shouldOffer(0, '    total += row.amount'), true);
  assert.equal(shouldOffer(4, '    total += row.amount'), false, 'typing in the editor');
  assert.equal(shouldOffer(0, ''), false, 'an empty line: editing, not a breakpoint');
  assert.equal(shouldOffer(0, '   '), false);
});
