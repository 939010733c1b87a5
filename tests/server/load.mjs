// tests/server/load.mjs - load test of `seedling serve` on loopback: N concurrent streaming chat requests against the
// same N requests one at a time, arms interleaved (one at a time, concurrent, concurrent, one at a time, ...), in one
// run against one server. Prints aggregate tokens/s of each arm, their ratio, time-to-first-token percentiles, the
// engine's own decode speed and bandwidth ceiling from `seedling bench`, and checks 0 errors and that every answer is
// the same in every arm and round.
// Invariant: bounded in count (streams x 2 x rounds requests) and in time (--time-limit-s aborts what is left and
// counts it as errors); it starts its own server and only ever talks to it on loopback.
//
//   node tests/server/load.mjs --binary build/seedling --model models/seedling-demo-moe --streams 64 --max-seqs 8,64
//
// (--max-seqs takes a list: one server, and one set of interleaved arms, for each.)
//
// runLoad() is also what tests/server/load.test.mjs runs, smaller, in CI.
import { execFileSync } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { MODEL_ID, batchRequest, client, metricValue, metrics, startServer, streamChat } from './lib.mjs';

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// The load's request i: a chat turn of its own prompt and length, greedy or seeded (lib.mjs batchRequest).
export function loadRequest(i, maxTokens) {
  const { prompt, ...rest } = batchRequest(i, { maxTokens });
  return { model: MODEL_ID(), messages: [{ role: 'user', content: prompt }], ...rest, stream_options: { include_usage: true } };
}

// One request: its answer, tokens, time to first token and duration in seconds, or its error.
async function timedRequest(openai, body, signal) {
  const t0 = performance.now();
  let first = null;
  try {
    const res = await streamChat(openai, body, {
      onChunk: (c) => {
        if (first === null && c.choices.some((ch) => ch.delta?.content)) first = performance.now();
      },
      signal,
    });
    const end = performance.now();
    if (!res.usage) throw new Error('no usage in the last chunk');
    return { text: res.text, tokens: res.usage.completion_tokens, ttft: ((first ?? end) - t0) / 1000, seconds: (end - t0) / 1000 };
  } catch (err) {
    return { error: String(err?.message || err) };
  }
}

// Prompt tokens the server fed to the model and found already in a slot's cache (prefix reuse), from /metrics.
async function promptCounters(server) {
  const m = await metrics(server);
  return { fed: metricValue(m, 'seedling_prompt_tokens_total'), reused: metricValue(m, 'seedling_prompt_tokens_reused_total') };
}

// Runs the arms against `server` and returns the figures. The load is the same in every arm and round.
export async function runLoad(server, { streams = 64, rounds = 2, minTokens = 16, maxTokens = 64, timeLimitS = 300 } = {}) {
  const openai = client(server, { timeout: timeLimitS * 1000 });
  const span = maxTokens - minTokens + 1;
  const bodies = Array.from({ length: streams }, (_, i) => loadRequest(i, minTokens + ((i * 37) % span)));
  const deadline = new AbortController();
  setMaxListeners(0, deadline.signal);  // no limit: every request in flight listens to it, several times over
  const timer = setTimeout(() => deadline.abort(), timeLimitS * 1000);
  const send = (body) => timedRequest(openai, body, deadline.signal);
  const arms = { sequential: [], concurrent: [] };
  const reference = [];
  let mismatches = 0;
  let errors = 0;
  try {
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? ['sequential', 'concurrent'] : ['concurrent', 'sequential'];
      for (const arm of order) {
        const promptBefore = await promptCounters(server);
        const t0 = performance.now();
        let results;
        if (arm === 'sequential') {
          results = [];
          for (const b of bodies) results.push(await send(b));
        } else {
          results = await Promise.all(bodies.map((b) => send(b)));
        }
        const wall = (performance.now() - t0) / 1000;
        const promptAfter = await promptCounters(server);
        results.forEach((res, i) => {
          if (res.error) {
            errors += 1;
            if (errors <= 5) console.error(`load: ${arm} round ${r} request ${i}: ${res.error}`);
            return;
          }
          if (reference[i] === undefined) reference[i] = res.text;
          else if (reference[i] !== res.text) {
            mismatches += 1;
            if (mismatches <= 5) console.error(`load: ${arm} round ${r} request ${i} answered differently`);
          }
        });
        const ok = results.filter((x) => !x.error);
        const tokens = ok.reduce((a, x) => a + x.tokens, 0);
        const ttft = ok.map((x) => x.ttft).sort((a, b) => a - b);
        arms[arm].push({
          round: r, wall, tokens, tokensPerS: tokens / wall, errors: results.length - ok.length,
          promptFed: promptAfter.fed - promptBefore.fed, promptReused: promptAfter.reused - promptBefore.reused,
          ttftP50: percentile(ttft, 50), ttftP90: percentile(ttft, 90), ttftP99: percentile(ttft, 99), ttftMax: ttft.at(-1),
        });
      }
    }
  } finally {
    clearTimeout(timer);
  }
  const ratios = arms.concurrent.map((c, r) => c.tokensPerS / arms.sequential[r].tokensPerS);
  return { streams, rounds, minTokens, maxTokens, arms, ratios, ratioMedian: median(ratios), errors, mismatches };
}

// `seedling bench` on the same model: the engine's decode speed at batch 1 and its bandwidth ceiling.
function engineBench(binary, model) {
  const text = execFileSync(binary, ['bench', '-m', model, '--prompt-tokens', '32', '-n', '64', '--repeats', '3'], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
  });
  const num = (re) => Number(re.exec(text)?.[1]);
  return { decode: num(/decode:\s+([\d.]+) tok\/s/), ceiling: num(/ceiling at this bandwidth: ([\d.]+) tok\/s/) };
}

function report(r, bench, flags) {
  const f = (x, d = 1) => x.toFixed(d);
  const ms = (x) => (x * 1000).toFixed(0);
  const lines = [
    `streams ${r.streams}, rounds ${r.rounds} (arms interleaved), max_tokens ${r.minTokens}..${r.maxTokens}, server flags: ${flags.join(' ')}`,
    '',
    '| arm | round | wall s | tokens | tokens/s | TTFT p50 ms | p90 ms | p99 ms | max ms | prompt fed / reused | errors |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const arm of ['sequential', 'concurrent']) {
    for (const a of r.arms[arm]) {
      lines.push(`| ${arm} | ${a.round} | ${f(a.wall, 2)} | ${a.tokens} | ${f(a.tokensPerS)} | ${ms(a.ttftP50)} | ${ms(a.ttftP90)} | ${ms(a.ttftP99)} | ${ms(a.ttftMax)} | ${a.promptFed} / ${a.promptReused} | ${a.errors} |`);
    }
  }
  lines.push('');
  lines.push(`concurrent / sequential tokens/s: median ${f(r.ratioMedian, 2)} (min ${f(Math.min(...r.ratios), 2)}, max ${f(Math.max(...r.ratios), 2)})`);
  if (bench) {
    const seq = median(r.arms.sequential.map((a) => a.tokensPerS));
    const conc = median(r.arms.concurrent.map((a) => a.tokensPerS));
    lines.push(`seedling bench, batch 1: decode ${f(bench.decode)} tok/s; bandwidth ceiling ${f(bench.ceiling)} tok/s`);
    lines.push(`sequential arm = ${f(seq / bench.decode, 2)} of bench decode, ${f(seq / bench.ceiling, 2)} of the ceiling; ` +
      `concurrent arm = ${f(conc / bench.decode, 2)} of bench decode, ${f(conc / bench.ceiling, 2)} of the ceiling`);
  }
  lines.push(`errors: ${r.errors}; answers that differ between arms or rounds: ${r.mismatches}`);
  return lines.join('\n');
}

async function main() {
  const { values: o } = parseArgs({
    options: {
      binary: { type: 'string', default: process.env.SEEDLING_BINARY || 'build/seedling' },
      model: { type: 'string', default: process.env.SEEDLING_MODEL || 'models/seedling-demo-moe' },
      streams: { type: 'string', default: '64' },
      'max-seqs': { type: 'string', default: '64' },
      rounds: { type: 'string', default: '2' },
      'min-tokens': { type: 'string', default: '16' },
      'max-tokens': { type: 'string', default: '64' },
      'time-limit-s': { type: 'string', default: '300' },
      json: { type: 'string' },
      'no-bench': { type: 'boolean', default: false },
    },
  });
  const int = (name) => {
    const v = Number(o[name]);
    if (!Number.isInteger(v) || v < 1) throw new Error(`--${name}: expected a positive integer, got ${o[name]}`);
    return v;
  };
  process.env.SEEDLING_BINARY = path.resolve(o.binary);
  process.env.SEEDLING_MODEL = path.resolve(o.model);
  const streams = int('streams');
  const maxSeqsList = o['max-seqs'].split(',').map((v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--max-seqs: expected positive integers separated by commas, got ${o['max-seqs']}`);
    return n;
  });
  const bench = o['no-bench'] ? null : engineBench(process.env.SEEDLING_BINARY, process.env.SEEDLING_MODEL);
  const runs = [];
  let failed = false;
  for (const maxSeqs of maxSeqsList) {
    const flags = ['--max-seqs', String(maxSeqs), '--ctx', '512'];
    const server = await startServer(flags);
    let result;
    try {
      result = await runLoad(server, {
        streams, rounds: int('rounds'), minTokens: int('min-tokens'), maxTokens: int('max-tokens'),
        timeLimitS: int('time-limit-s'),
      });
    } finally {
      await server.stop();
    }
    console.log(report(result, bench, flags) + '\n');
    runs.push({ ...result, flags });
    failed ||= result.errors !== 0 || result.mismatches !== 0;
  }
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ bench, runs }, null, 2));
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(`load: ${err.message}`);
    process.exitCode = 1;
  });
}
