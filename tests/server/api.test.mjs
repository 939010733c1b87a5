// tests/server/api.test.mjs - `seedling serve` driven by the official openai npm package: chat completions streaming
// and not, n choices, the Responses API, structured output (response_format json_schema), text completions, stop strings, usage and stream_options.include_usage, seeded sampling, and the errors a
// client sees (401 with --api-key, 400 for unsupported parameters; logprobs in both forms and for a context that is too long, 503 with
// Retry-After beyond --max-queue).
// Invariant: every expected answer is computed, never written down: streaming equals non-streaming, greedy equals
// `seedling run`, a stop string cuts exactly where it first occurs in the uncut answer.
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import {
  BINARY,
  MODEL_DIR,
  MODEL_ID,
  client,
  metricValue,
  streamChat,
  streamCompletion,
  waitForMetrics,
  withServer,
} from './lib.mjs';

const CTX = 512;
const fixture = withServer(['--ctx', String(CTX), '--max-seqs', '4']);

const chatBody = (content, extra = {}) => ({
  model: MODEL_ID(),
  messages: [{ role: 'user', content }],
  max_tokens: 24,
  temperature: 0,
  ...extra,
});

// The OpenAI-style error a call must fail with: its status, and the body's message naming `names`.
async function rejectsWith(promise, status, ErrorClass, ...names) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${err?.constructor?.name}: ${err?.message}`);
    assert.equal(err.status, status);
    assert.equal(typeof err.error?.message, 'string', `error body without error.message: ${JSON.stringify(err.error)}`);
    for (const name of names) {
      assert.ok(err.param === name || err.error.message.includes(name), `error does not name ${name}: ${err.message}`);
    }
    return true;
  });
}

describe('models and health', () => {
  test('/v1/models lists the model by its folder name', async () => {
    const ids = [];
    for await (const model of fixture.openai.models.list()) ids.push(model.id);
    assert.deepEqual(ids, [MODEL_ID()]);
  });
  test('/health answers 200', async () => {
    const res = await fetch(`${fixture.server.url}/health`);
    assert.equal(res.status, 200);
  });
});

describe('chat completions', () => {
  test('non-streaming: an assistant message, finish_reason and usage that add up', async () => {
    const res = await fixture.openai.chat.completions.create(chatBody('Write a function that adds two numbers.'));
    assert.equal(res.object, 'chat.completion');
    assert.equal(res.model, MODEL_ID());
    assert.equal(res.choices.length, 1);
    const [choice] = res.choices;
    assert.equal(choice.message.role, 'assistant');
    assert.equal(typeof choice.message.content, 'string');
    assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
    assert.ok(res.usage.prompt_tokens > 0);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
    if (choice.finish_reason === 'length') assert.equal(res.usage.completion_tokens, 24);
    else assert.ok(res.usage.completion_tokens <= 24);
  });

  test('streaming gives the same text as non-streaming, in several chunks, and no usage unless asked', async () => {
    // Long enough to come in several chunks: the server sends what is new when it writes, so a busy machine merges.
    const body = chatBody('Hello', { max_tokens: 400 });
    const whole = await fixture.openai.chat.completions.create(body);
    const streamed = await streamChat(fixture.openai, body);
    assert.equal(streamed.text, whole.choices[0].message.content);
    assert.equal(streamed.finish, whole.choices[0].finish_reason);
    assert.ok(streamed.chunks > 1, `answer came in ${streamed.chunks} chunk(s): ${JSON.stringify(streamed.text)}`);
    assert.equal(streamed.usage, null);
  });

  test('stream_options.include_usage: a last chunk with usage equal to the non-streaming usage', async () => {
    const body = chatBody('import os', { max_tokens: 20 });
    const whole = await fixture.openai.chat.completions.create(body);
    const chunks = [];
    await streamChat(fixture.openai, { ...body, stream_options: { include_usage: true } }, { onChunk: (c) => chunks.push(c) });
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
    assert.equal(last.usage.total_tokens, whole.usage.total_tokens);
    assert.ok(chunks.slice(0, -1).every((c) => !c.usage), 'usage before the last chunk');
  });

  test('max_completion_tokens bounds the answer like max_tokens', async () => {
    const { max_tokens, ...body } = chatBody('class Tree:');
    const res = await fixture.openai.chat.completions.create({ ...body, max_completion_tokens: 5 });
    assert.ok(res.usage.completion_tokens <= 5);
    const ref = await fixture.openai.chat.completions.create({ ...body, max_tokens: 5 });
    assert.equal(res.choices[0].message.content, ref.choices[0].message.content);
  });
});

describe('text completions', () => {
  const prompt = 'def add(a, b):\n';
  test('greedy completion equals `seedling run` on the same prompt', async () => {
    const res = await fixture.openai.completions.create({ model: MODEL_ID(), prompt, max_tokens: 24, temperature: 0 });
    assert.equal(res.object, 'text_completion');
    const run = execFileSync(BINARY(), ['run', '-m', MODEL_DIR(), '-p', prompt, '-n', '24', '--temp', '0'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    assert.equal(prompt + res.choices[0].text + '\n', run); // run echoes the prompt and ends with a newline
    assert.equal(res.usage.completion_tokens, 24);
  });

  test('streaming equals non-streaming, with usage when asked', async () => {
    const body = { model: MODEL_ID(), prompt: 'import sys\n', max_tokens: 400, temperature: 0 };
    const whole = await fixture.openai.completions.create(body);
    const streamed = await streamCompletion(fixture.openai, { ...body, stream_options: { include_usage: true } });
    assert.equal(streamed.text, whole.choices[0].text);
    assert.ok(streamed.chunks > 1, `answer came in ${streamed.chunks} chunk(s)`);
    assert.deepEqual(streamed.usage, whole.usage);
  });
});

describe('stop strings', () => {
  // A stop string taken from the middle of the uncut greedy answer cuts it where it first occurs.
  for (const stream of [false, true]) {
    test(`stop cuts at the first occurrence and is not returned (${stream ? 'streaming' : 'non-streaming'})`, async () => {
      const body = { model: MODEL_ID(), prompt: 'def fibonacci(n):\n', max_tokens: 40, temperature: 0 };
      const full = (await fixture.openai.completions.create(body)).choices[0].text;
      assert.ok(full.length > 20, `answer too short to cut: ${JSON.stringify(full)}`);
      const stop = full.slice(10, 13);
      const expected = full.slice(0, full.indexOf(stop));
      const cut = stream
        ? await streamCompletion(fixture.openai, { ...body, stop: [stop, 'never appears'] })
        : (await fixture.openai.completions.create({ ...body, stop: [stop, 'never appears'] })).choices[0];
      assert.equal(cut.text, expected);
      assert.equal(cut.finish ?? cut.finish_reason, 'stop');
    });
  }

  test('a stop string in a chat completion', async () => {
    const body = chatBody('Write a function that adds two numbers.', { max_tokens: 40 });
    const full = (await fixture.openai.chat.completions.create(body)).choices[0].message.content;
    assert.ok(full.length > 12, `answer too short to cut: ${JSON.stringify(full)}`);
    const stop = full.slice(6, 9);
    const res = await fixture.openai.chat.completions.create({ ...body, stop });
    assert.equal(res.choices[0].message.content, full.slice(0, full.indexOf(stop)));
    assert.equal(res.choices[0].finish_reason, 'stop');
    assert.equal((await streamChat(fixture.openai, { ...body, stop })).text, full.slice(0, full.indexOf(stop)));
  });
});

describe('seeded sampling', () => {
  const body = (seed) => chatBody('class Tree:', { temperature: 1.0, top_p: 0.95, max_tokens: 32, seed });
  test('the same seed gives the same answer, streaming or not; another seed another answer', async () => {
    const a = await fixture.openai.chat.completions.create(body(1234));
    const b = await fixture.openai.chat.completions.create(body(1234));
    const s = await streamChat(fixture.openai, body(1234));
    const c = await fixture.openai.chat.completions.create(body(4321));
    assert.ok(a.choices[0].message.content.length > 0, 'empty answer');
    assert.equal(b.choices[0].message.content, a.choices[0].message.content);
    assert.equal(s.text, a.choices[0].message.content);
    assert.notEqual(c.choices[0].message.content, a.choices[0].message.content);
    const greedy = await fixture.openai.chat.completions.create(body(undefined));
    assert.equal(typeof greedy.choices[0].message.content, 'string');
  });
});

describe('n choices', () => {
  // Choice i is the request alone with seed + i; the prompt counts once in usage; streamed chunks carry their index.
  test('n: 2 gives two choices, each the request alone with seed + i, streaming the same', async () => {
    const body = (extra) => chatBody('class Tree:', { temperature: 1.0, max_tokens: 16, seed: 77, ...extra });
    const r = await fixture.openai.chat.completions.create(body({ n: 2 }));
    assert.equal(r.choices.length, 2);
    const alone = [await fixture.openai.chat.completions.create(body({})),
      await fixture.openai.chat.completions.create(body({ seed: 78 }))];
    r.choices.forEach((c, i) => {
      assert.equal(c.index, i);
      assert.equal(c.message.content, alone[i].choices[0].message.content);
    });
    assert.equal(r.usage.prompt_tokens, alone[0].usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, alone[0].usage.completion_tokens + alone[1].usage.completion_tokens);
    const texts = ['', ''];
    const stream = await fixture.openai.chat.completions.create({ ...body({ n: 2 }), stream: true });
    for await (const chunk of stream) {
      for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
    }
    assert.deepEqual(texts, r.choices.map((c) => c.message.content));
  });
});

describe('responses API', () => {
  // responses.create runs the chat path: the same text, usage counts and seed behaviour, streamed or not.
  test('responses.create gives the chat reply as output_text, streaming the same', async () => {
    const chatReply = await fixture.openai.chat.completions.create({
      model: MODEL_ID(), messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'class Tree:' }],
      max_tokens: 12, temperature: 0.7, seed: 9 });
    const body = { model: MODEL_ID(), instructions: 'Be brief.', input: 'class Tree:', max_output_tokens: 12,
      temperature: 0.7, seed: 9, store: false };
    const r = await fixture.openai.responses.create(body);
    assert.equal(r.object, 'response');
    assert.equal(r.output_text, chatReply.choices[0].message.content);
    assert.equal(r.usage.input_tokens, chatReply.usage.prompt_tokens);
    assert.equal(r.usage.output_tokens, chatReply.usage.completion_tokens);
    assert.equal(r.status, chatReply.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
    let text = '';
    let final = null;
    const stream = await fixture.openai.responses.create({ ...body, stream: true });
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
    }
    assert.equal(text, r.output_text);
    assert.equal(final.output[0].content[0].text, r.output_text);
  });
  test('previous_response_id is refused with 400 naming it (nothing is stored)', async () => {
    await rejectsWith(fixture.openai.responses.create({ model: MODEL_ID(), input: 'hi', previous_response_id: 'resp_x' }),
      400, OpenAI.BadRequestError, 'previous_response_id');
  });
});

describe('structured output', () => {
  // The demo model writes Python, never JSON, unless the schema makes it: every seed's reply must JSON.parse and
  // have the schema's fields with their types, and end with "stop".
  const schema = {
    type: 'object',
    properties: {
      title: { type: 'string', maxLength: 16 },
      year: { type: 'integer' },
      rating: { type: 'number' },
      genre: { enum: ['drama', 'comedy', 'horror'] },
      cast: { type: 'array', items: { $ref: '#/$defs/actor' }, maxItems: 2 },
    },
    required: ['title', 'year', 'rating', 'genre', 'cast'],
    additionalProperties: false,
    $defs: {
      actor: {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 10 }, lead: { type: 'boolean' } },
        required: ['name', 'lead'],
        additionalProperties: false,
      },
    },
  };
  const movieFormat = { type: 'json_schema', json_schema: { name: 'movie', schema, strict: true } };
  const checkMovie = (text) => {
    const m = JSON.parse(text);
    assert.deepEqual(Object.keys(m).sort(), ['cast', 'genre', 'rating', 'title', 'year']);
    assert.equal(typeof m.title, 'string');
    assert.ok([...m.title].length <= 16, m.title);
    assert.ok(Number.isInteger(m.year), text);
    assert.equal(typeof m.rating, 'number');
    assert.ok(['drama', 'comedy', 'horror'].includes(m.genre), text);
    assert.ok(Array.isArray(m.cast) && m.cast.length <= 2, text);
    for (const a of m.cast) {
      assert.deepEqual(Object.keys(a).sort(), ['lead', 'name']);
      assert.equal(typeof a.name, 'string');
      assert.equal(typeof a.lead, 'boolean');
    }
  };
  test('chat.completions.create with response_format json_schema (strict, store: false) gives JSON of the schema', async () => {
    for (const seed of [1, 2, 3, 4]) {
      const res = await fixture.openai.chat.completions.create({
        model: MODEL_ID(), messages: [{ role: 'user', content: 'A movie, as JSON.' }], max_tokens: 300,
        temperature: 1, seed, store: false, response_format: movieFormat });
      assert.equal(res.choices[0].finish_reason, 'stop', res.choices[0].message.content);
      checkMovie(res.choices[0].message.content);
    }
  });
  test('streamed, n: 2, and responses.create with text.format follow it too', async () => {
    const body = { model: MODEL_ID(), messages: [{ role: 'user', content: 'A movie.' }], max_tokens: 300,
      temperature: 1, seed: 7, n: 2, store: false, response_format: movieFormat };
    const whole = await fixture.openai.chat.completions.create(body);
    assert.equal(whole.choices.length, 2);
    for (const c of whole.choices) checkMovie(c.message.content);
    const texts = ['', ''];
    for await (const chunk of await fixture.openai.chat.completions.create({ ...body, stream: true })) {
      for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
    }
    assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
    const r = await fixture.openai.responses.create({ model: MODEL_ID(), input: 'A movie.', max_output_tokens: 300,
      seed: 3, store: false, text: { format: { type: 'json_schema', name: 'movie', schema, strict: true } } });
    assert.equal(r.status, 'completed');
    checkMovie(r.output_text);
    const o = await fixture.openai.chat.completions.create({ model: MODEL_ID(), messages: [{ role: 'user', content: 'x' }],
      max_tokens: 300, seed: 2, response_format: { type: 'json_object' } });
    if (o.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(o.choices[0].message.content), 'object');
  });
  test('a schema keyword the matcher does not check is a 400 naming it', async () => {
    const bad = { ...schema, properties: { ...schema.properties, title: { type: 'string', pattern: '^[A-Z]' } } };
    await rejectsWith(fixture.openai.chat.completions.create({ model: MODEL_ID(), messages: [{ role: 'user', content: 'x' }],
      max_tokens: 8, response_format: { type: 'json_schema', json_schema: { name: 'm', schema: bad, strict: true } } }),
    400, OpenAI.BadRequestError, 'pattern');
  });
});

describe('logprobs', () => {
  // Greedy: the chosen token is the most likely one, so its entry is the first of its alternatives; the entries'
  // texts make the answer; streaming gives the same entries as non-streaming.
  test('chat: one entry per token of the answer, greedy = the top alternative, streaming the same', async () => {
    const body = chatBody('Name three colours.', { logprobs: true, top_logprobs: 3 });
    const r = await fixture.openai.chat.completions.create(body);
    const content = r.choices[0].logprobs.content;
    assert.ok(content.length > 0 && content.length <= r.usage.completion_tokens);
    assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
    for (const e of content) {
      assert.equal(e.top_logprobs.length, 3);
      assert.equal(e.top_logprobs[0].token, e.token);
      assert.equal(e.top_logprobs[0].logprob, e.logprob);
      assert.ok(e.logprob <= 0 && e.top_logprobs[1].logprob <= e.logprob);
      assert.ok(e.top_logprobs.reduce((a, t) => a + Math.exp(t.logprob), 0) <= 1 + 1e-6);
      assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    }
    const streamed = [];
    await streamChat(fixture.openai, body, {
      onChunk: (c) => streamed.push(...(c.choices[0]?.logprobs?.content ?? [])),
    });
    assert.deepEqual(streamed, content);
    const plain = await fixture.openai.chat.completions.create(chatBody('Name three colours.'));
    assert.equal(plain.choices[0].logprobs, null);
  });
  test('completions: the legacy form, tokens and offsets making the text', async () => {
    const r = await fixture.openai.completions.create({ model: MODEL_ID(), prompt: 'The cat', max_tokens: 8,
      temperature: 0, logprobs: 2 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    let offset = 0;
    lp.tokens.forEach((t, i) => {
      assert.equal(lp.text_offset[i], offset);
      offset += Buffer.byteLength(t, 'utf8');
      assert.equal(Object.keys(lp.top_logprobs[i]).length <= 2, true);
      assert.equal(Math.max(...Object.values(lp.top_logprobs[i])), lp.token_logprobs[i]);
    });
  });
});

describe('errors through the client', () => {
  test('n above 16 is refused with 400 naming n', async () => {
    await rejectsWith(fixture.openai.chat.completions.create(chatBody('hi', { n: 17 })), 400, OpenAI.BadRequestError, 'n');
  });
  test('top_logprobs without logprobs, or above 20, is refused with 400 naming it', async () => {
    for (const extra of [{ top_logprobs: 2 }, { logprobs: true, top_logprobs: 21 }]) {
      await rejectsWith(fixture.openai.chat.completions.create(chatBody('hi', extra)), 400, OpenAI.BadRequestError,
        'top_logprobs');
    }
  });
  test('a prompt longer than the context gets 400', async () => {
    const long = 'x = 1\n'.repeat(CTX);
    await rejectsWith(fixture.openai.completions.create({ model: MODEL_ID(), prompt: long, max_tokens: 4 }), 400, OpenAI.BadRequestError);
    await rejectsWith(fixture.openai.chat.completions.create(chatBody(long, { max_tokens: 4 })), 400, OpenAI.BadRequestError);
  });
  test('prompt + max_tokens beyond the context gets 400', async () => {
    await rejectsWith(fixture.openai.chat.completions.create(chatBody('hi', { max_tokens: CTX })), 400, OpenAI.BadRequestError);
  });
  test('an unknown model name is a 404 model_not_found', async () => {
    await rejectsWith(
      fixture.openai.chat.completions.create(chatBody('hi', { model: 'gpt-4o' })),
      404,
      OpenAI.NotFoundError,
      'model',
    );
  });
  test('fields frameworks send that change nothing here are accepted', async () => {
    const res = await fixture.openai.chat.completions.create(
      chatBody('hi', {
        max_tokens: 2,
        store: false,
        metadata: { run: 'test' },
        service_tier: 'auto',
        reasoning_effort: 'low',
        logit_bias: {},
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
        tool_choice: 'none',
      }),
    );
    assert.ok(res.usage.completion_tokens <= 2);
  });
  test('the server still answers after the errors', async () => {
    const res = await fixture.openai.chat.completions.create(chatBody('hi', { max_tokens: 2 }));
    assert.ok(res.usage.completion_tokens <= 2);
  });
});

describe('--api-key', () => {
  const keyed = withServer(['--api-key', 'sk-seedling-test']);
  test('a wrong key gets 401 through the client; the right key is served', async () => {
    await rejectsWith(client(keyed.server, { apiKey: 'sk-wrong' }).models.list(), 401, OpenAI.AuthenticationError);
    await rejectsWith(
      client(keyed.server, { apiKey: 'sk-wrong' }).chat.completions.create(chatBody('hi', { max_tokens: 2 })),
      401,
      OpenAI.AuthenticationError,
    );
    const res = await client(keyed.server, { apiKey: 'sk-seedling-test' }).chat.completions.create(chatBody('hi', { max_tokens: 2 }));
    assert.ok(res.choices[0].message.content !== undefined);
  });
});

describe('--max-queue', () => {
  const busy = withServer(['--max-seqs', '1', '--max-queue', '1']);
  test('beyond the queue the client gets 503 with Retry-After; the queued request is then served', async () => {
    const { server, openai } = busy;
    const controller = new AbortController();
    const long = { model: MODEL_ID(), prompt: 'def add(a, b):\n', max_tokens: 2000, temperature: 0 };
    const running = await openai.completions.create({ ...long, stream: true }, { signal: controller.signal });
    const first = await running[Symbol.asyncIterator]().next();
    assert.equal(first.done, false);
    const queued = openai.completions.create({ ...long, max_tokens: 3 });
    await waitForMetrics(server, (s) => metricValue(s, 'seedling_queue_depth') === 1);
    await assert.rejects(openai.completions.create({ ...long, max_tokens: 3 }), (err) => {
      assert.equal(err.status, 503, err.message);
      assert.ok(Number(err.headers?.get?.('retry-after') ?? err.headers?.['retry-after']) > 0, 'no Retry-After');
      assert.equal(typeof err.error?.message, 'string');
      return true;
    });
    controller.abort();
    assert.equal((await queued).usage.completion_tokens, 3);
  });
});
