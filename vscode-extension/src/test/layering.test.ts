// The logic must run in plain Node: only the glue may load 'vscode'.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

const GLUE = new Set(['extension.js', 'debug/provider.js', 'debug/actions.js', 'view/provider.js', 'view/watch.js', 'conditions/provider.js']);

function walk(dir: string, base = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? (e.name === 'test' || e.name === 'testkit' ? [] : walk(path.join(dir, e.name), `${base}${e.name}/`)) : e.name.endsWith('.js') ? [`${base}${e.name}`] : [],
  );
}

test('only the glue modules import vscode', () => {
  const out = path.join(__dirname, '..');
  const files = walk(out);
  assert.ok(files.length > 10);
  for (const f of files) {
    const uses = /require\("vscode"\)/.test(fs.readFileSync(path.join(out, f), 'utf8'));
    if (!GLUE.has(f)) {
      assert.equal(uses, false, `${f} imports vscode`);
    }
  }
});

test('every pure module loads without vscode', async () => {
  const out = path.join(__dirname, '..');
  for (const f of walk(out).filter((f) => !GLUE.has(f))) {
    await import(path.join(out, f));
  }
});
