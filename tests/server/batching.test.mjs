// tests/server/batching.test.mjs - the property continuous batching must keep, seen through the openai client: 8
// concurrent requests of different lengths, greedy and seeded, return exactly what each returns alone; and a client
// that aborts mid-stream frees its sequence slot (seedling_slots_in_use in /metrics back to 0).
// Invariant: the reference answers are the server's own, one request at a time, measured in the same run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  MODEL_ID,
  batchRequest,
  metricValue,
  metrics,
  streamChat,
  streamCompletion,
  waitForMetrics,
  withServer,
} from './lib.mjs';

const N = 8;
const fixture = withServer(['--max-seqs', String(N), '--ctx', '2048']);

// Request i through one of four paths: chat or text completion, streaming or not. Returns text and token count.
async function send(i, request) {
  const path = i % 4;
  if (path === 0 || path === 1) {
    const { prompt, ...rest } = request;
    const body = { model: MODEL_ID(), ...rest, messages: [{ role: 'user', content: prompt }] };
    if (path === 0) {
      const res = await fixture.openai.chat.completions.create(body);
      return { text: res.choices[0].message.content, tokens: res.usage.completion_tokens };
    }
    const res = await streamChat(fixture.openai, { ...body, stream_options: { include_usage: true } });
    return { text: res.text, tokens: res.usage.completion_tokens };
  }
  const body = { model: MODEL_ID(), ...request };
  if (path === 2) {
    const res = await fixture.openai.completions.create(body);
    return { text: res.choices[0].text, tokens: res.usage.completion_tokens };
  }
  const res = await streamCompletion(fixture.openai, { ...body, stream_options: { include_usage: true } });
  return { text: res.text, tokens: res.usage.completion_tokens };
}

test('8 concurrent requests of different lengths return what each returns alone', async (t) => {
  const requests = Array.from({ length: N }, (_, i) => batchRequest(i));
  const alone = [];
  for (let i = 0; i < N; i++) alone.push(await send(i, requests[i]));
  t.diagnostic(`tokens of each request alone: ${alone.map((a) => a.tokens).join(' ')}`);
  assert.ok(alone.every((a) => a.tokens > 1), 'every request should answer with tokens');
  assert.ok(new Set(alone.map((a) => a.tokens)).size > 4, 'the requests should differ in length');
  // All at once, then again with staggered starts so that requests join a batch that is already decoding.
  for (const staggerMs of [0, 15]) {
    const together = await Promise.all(
      requests.map(async (r, i) => {
        await new Promise((res) => setTimeout(res, i * staggerMs));
        return send(i, r);
      }),
    );
    for (let i = 0; i < N; i++) {
      assert.deepEqual(together[i], alone[i], `request ${i} (stagger ${staggerMs} ms) differs when batched`);
    }
  }
  assert.equal(metricValue(await metrics(fixture.server), 'seedling_slots_in_use'), 0);
});

test('a client that aborts mid-stream frees its slot', async (t) => {
  const before = await metrics(fixture.server);
  assert.equal(metricValue(before, 'seedling_slots_in_use'), 0);
  const generatedBefore = metricValue(before, 'seedling_generated_tokens_total');
  const maxTokens = 2000;
  const controller = new AbortController();
  const stream = await fixture.openai.completions.create(
    { model: MODEL_ID(), prompt: 'def add(a, b):\n', max_tokens: maxTokens, temperature: 0, stream: true },
    { signal: controller.signal },
  );
  let chunks = 0;
  let finished = false;
  let inUseWhileStreaming = null;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.text) chunks += 1;
      if (chunk.choices[0]?.finish_reason) finished = true;
      if (chunks === 3) {
        inUseWhileStreaming = metricValue(await metrics(fixture.server), 'seedling_slots_in_use');
        controller.abort();
      }
    }
  } catch (err) {
    // The client may end the iteration quietly or throw its abort error; anything else is a failure.
    if (!(err.name === 'AbortError' || err.constructor.name === 'APIUserAbortError')) throw err;
  }
  assert.ok(controller.signal.aborted && !finished, `the stream ended by itself after ${chunks} chunks`);
  assert.equal(inUseWhileStreaming, 1);
  const abortedAt = Date.now();
  const freed = await waitForMetrics(fixture.server, (s) => metricValue(s, 'seedling_slots_in_use') === 0);
  const freedMs = Date.now() - abortedAt;
  // The sequence stopped: far fewer tokens than asked for, and no more after the slot came back.
  const generated = metricValue(freed, 'seedling_generated_tokens_total') - generatedBefore;
  assert.ok(generated < maxTokens / 2, `${generated} tokens generated for the aborted request`);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(metricValue(await metrics(fixture.server), 'seedling_generated_tokens_total') - generatedBefore, generated);
  const res = await fixture.openai.completions.create({ model: MODEL_ID(), prompt: 'import os\n', max_tokens: 4, temperature: 0 });
  assert.equal(res.usage.completion_tokens, 4);
  t.diagnostic(`slot freed ${freedMs} ms after the abort, ${generated} tokens generated`);
});
