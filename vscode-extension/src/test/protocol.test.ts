import assert from 'node:assert/strict';
import { test } from 'node:test';
import { asAnswer, clampMaxRows, selectAll, selectionText, selectNone, selectPartition, selectStage } from '../protocol';

test('selections as Go’s selection.Selection reads them', () => {
  // All(): every list nil; None(): an empty partition list. sampleRate must
  // be in (0, 1] or the proxy refuses the selection.
  assert.equal(JSON.stringify(selectAll()), '{"sampleRate":1}');
  assert.equal(JSON.stringify(selectNone()), '{"partitions":[],"sampleRate":1}');
  assert.equal(JSON.stringify(selectPartition(7)), '{"partitions":[7],"sampleRate":1}');
  assert.equal(JSON.stringify(selectStage(3)), '{"stages":[3],"sampleRate":1}');
});

test('selectionText says it as `sparkdap select` does', () => {
  assert.equal(selectionText({ partitions: null, stages: null, executors: null, sampleRate: 1 }), 'partitions all · stages all · executors all');
  assert.equal(selectionText({ partitions: [], sampleRate: 1 }), 'partitions none · stages all · executors all');
  assert.equal(selectionText({ partitions: [37], stages: [4], executors: ['1', '2'], sampleRate: 0.1 }), 'partitions 37 · stages 4 · executors 1,2 · sample rate 0.1');
  assert.equal(selectionText(null, true), 'as submitted');
});

test('clampMaxRows', () => {
  assert.equal(clampMaxRows(undefined), 500);
  assert.equal(clampMaxRows(0), 1);
  assert.equal(clampMaxRows(99999), 5000);
  assert.equal(clampMaxRows(250.7), 250);
});

test('asAnswer refuses what is not an answer', () => {
  assert.equal(asAnswer(null), undefined);
  assert.equal(asAnswer([1]), undefined);
  assert.equal(asAnswer({ known: 'x' }), undefined);
  assert.deepEqual(asAnswer({ known: [], more: 2 }), { known: [], more: 2 });
});
