// tests/server/load.test.mjs - the load test of load.mjs, small and bounded, for CI: 16 concurrent streams against
// the same requests one at a time, one round of each arm. It asserts only what must hold on any machine: no errors,
// and every answer the same batched as alone. Speeds are printed as diagnostics, never asserted.
// Invariant: loopback only, at most 32 requests, and a 120 s limit after which the rest count as errors.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runLoad } from './load.mjs';
import { withServer } from './lib.mjs';

const fixture = withServer(['--max-seqs', '8', '--ctx', '512']);

test('16 concurrent streams through 8 slots: 0 errors, the same answers as one at a time', async (t) => {
  const r = await runLoad(fixture.server, { streams: 16, rounds: 1, minTokens: 8, maxTokens: 32, timeLimitS: 120 });
  assert.equal(r.errors, 0);
  assert.equal(r.mismatches, 0);
  assert.equal(r.arms.concurrent[0].tokens, r.arms.sequential[0].tokens);
  t.diagnostic(`concurrent / sequential tokens/s: ${r.ratioMedian.toFixed(2)}`);
});
