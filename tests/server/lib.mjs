// tests/server/lib.mjs - what the server tests share: starting `seedling serve` on a free loopback port and stopping
// it, an openai client for it, /metrics parsing, and the requests whose answers must not depend on batching.
// Invariant: every server a test starts is stopped by SIGTERM and must exit 0; a server that never says it listens,
// or dies early, fails the test with its stderr in the message.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';
import OpenAI from 'openai';

// Set by tests/CMakeLists.txt for ctest; a run by hand names them itself (see tests/server/README.md).
export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run through ctest, or set SEEDLING_BINARY and SEEDLING_MODEL`);
  return value;
}
export const BINARY = () => env('SEEDLING_BINARY');
export const MODEL_DIR = () => env('SEEDLING_MODEL');
export const MODEL_ID = () => path.basename(path.resolve(MODEL_DIR()));

// The folder a test keeps what it made (screenshots) in: SEEDLING_TEST_OUT, under the build tree from ctest.
export function outDir() {
  const dir = process.env.SEEDLING_TEST_OUT || path.resolve('server-test-out');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

const LISTENING = /^seedling serve: listening on (http:\/\/\S+)$/m;

// Starts `seedling serve -m MODEL --port 0 ...args` and resolves once it prints its listening line.
export async function startServer(args = [], { startTimeoutMs = 60000 } = {}) {
  const proc = spawn(BINARY(), ['serve', '-m', MODEL_DIR(), '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.setEncoding('utf8');
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`seedling serve ${args.join(' ')} did not listen within ${startTimeoutMs} ms:\n${stderr}`));
    }, startTimeoutMs);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = LISTENING.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`seedling serve ${args.join(' ')} exited (${code ?? signal}) before listening:\n${stderr}`));
    });
  });
  const host = new URL(url).hostname;
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '[::1]') {
    proc.kill('SIGKILL');
    throw new Error(`seedling serve listens on ${host}, not on loopback`);
  }
  return {
    url,
    proc,
    stderr: () => stderr,
    // SIGTERM; resolves with the exit code and throws unless the server exited 0 within the timeout.
    async stop({ timeoutMs = 20000 } = {}) {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      const { code, signal } = await exited;
      clearTimeout(timer);
      if (code !== 0) throw new Error(`seedling serve exited with ${code ?? signal} after SIGTERM:\n${stderr}`);
      return code;
    },
  };
}

// In a test file or describe block: a server started with `args` before its tests and stopped (exit 0) after them.
// The returned object gets `server` and `openai` (a client for it) once the tests run.
export function withServer(args) {
  const fixture = {};
  before(async () => {
    fixture.server = await startServer(args);
    fixture.openai = client(fixture.server);
  });
  after(async () => {
    if (fixture.server) await fixture.server.stop();
  });
  return fixture;
}

export function client(server, { apiKey = 'none', ...options } = {}) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0, timeout: 120000, ...options });
}

// Prometheus text -> [{name, labels, value}] for every sample line.
export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    const labels = {};
    for (const l of (m[2] || '').slice(1, -1).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2];
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

export async function metrics(server) {
  const res = await fetch(`${server.url}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
  return parseMetrics(await res.text());
}

// The value of the one sample named `name` (no labels); an error naming the metric when it is absent.
export function metricValue(samples, name) {
  const found = samples.filter((s) => s.name === name);
  if (found.length !== 1) {
    throw new Error(`/metrics has ${found.length} samples named ${name}; names: ${[...new Set(samples.map((s) => s.name))]}`);
  }
  return found[0].value;
}

// Waits until pred(samples of /metrics) holds; throws with the last samples when it does not within timeoutMs.
export async function waitForMetrics(server, pred, { timeoutMs = 10000, intervalMs = 20 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await metrics(server);
    if (pred(last)) return last;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`/metrics did not reach the expected state in ${timeoutMs} ms:\n${JSON.stringify(last)}`);
}

// The demo model writes Python: prompts of different lengths, so that requests batched together differ.
// (Chosen so that each gets an answer of several tokens as a chat message too: some prompts get an empty one.)
export const PROMPTS = [
  'def binary_search(items, x):\n    lo = 0\n',
  'import os\n\ndef list_files(path):\n',
  'class Stack:\n    def __init__(self):\n',
  '# Parse a line of comma-separated values.\ndef parse_csv_line(line):\n',
  'def is_prime(n):\n    if n < 2:\n',
  'from collections import defaultdict\n\n\ndef count_words(text):\n    counts = defaultdict(int)\n',
  'import json\nimport sys\n\n\ndef main(argv):\n    if len(argv) < 2:\n',
  'def quicksort(items):\n    if len(items) <= 1:\n        return items\n    pivot = items[0]\n',
];

// Request i of a batch: its own prompt and length; even ones greedy, odd ones seeded sampling.
export function batchRequest(i, { maxTokens = 8 + ((i * 7) % 41) } = {}) {
  const request = { prompt: PROMPTS[i % PROMPTS.length], max_tokens: maxTokens };
  if (i % 2 === 0) return { ...request, temperature: 0 };
  return { ...request, temperature: 0.9, top_p: 0.95, seed: 1000 + i };
}

// Reads a stream of chat or text completion chunks: the text, the number of chunks that carried text,
// finish_reason and usage (null when no chunk had it). onChunk(chunk) sees every chunk as it arrives.
export async function collectStream(stream, { onChunk } = {}) {
  const out = { text: '', chunks: 0, finish: null, usage: null };
  for await (const chunk of stream) {
    if (onChunk) onChunk(chunk);
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      const piece = choice.delta ? choice.delta.content : choice.text;
      if (piece) {
        out.text += piece;
        out.chunks += 1;
      }
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

// A streaming chat or text completion read to its end; `signal` aborts it.
export async function streamChat(openai, body, { onChunk, signal } = {}) {
  return collectStream(await openai.chat.completions.create({ ...body, stream: true }, { signal }), { onChunk });
}

export async function streamCompletion(openai, body, { onChunk, signal } = {}) {
  return collectStream(await openai.completions.create({ ...body, stream: true }, { signal }), { onChunk });
}
