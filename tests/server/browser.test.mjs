// tests/server/browser.test.mjs - the chat page at / in headless Debian chromium (driven by playwright-core): it
// shows the model, sends a message, sees the answer stream in (more than one update), keeps the conversation across
// a reload, stops an answer (the server frees the slot), and shows <think> content apart from the answer.
// Screenshots (chat-page.png, chat-page-top.png, chat-page-stopped.png, chat-page-think.png) go to SEEDLING_TEST_OUT:
// build/tests/server/browser/ under ctest.
// Invariant: the streamed answer the page shows is compared with the server's answer to the same request through
// the openai client, so the page neither loses nor reorders text.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import { MODEL_ID, metricValue, outDir, waitForMetrics, withServer } from './lib.mjs';

const CHROMIUM = process.env.SEEDLING_CHROMIUM || '/usr/bin/chromium';
// Headless, and nothing that reaches past loopback (this machine has no network: background fetches only fail).
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const fixture = withServer(['--max-seqs', '2', '--ctx', '2048']);
let browser;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
});
after(async () => {
  if (browser) await browser.close();
});

async function openPage() {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => msg.type() === 'error' && problems.push(`console: ${msg.text()}`));
  await page.goto(fixture.server.url + '/');
  await page.waitForFunction((id) => document.getElementById('model').value === id, MODEL_ID());
  return { page, context, problems };
}

// Sets the page's settings, sends `text`, and records every distinct text of the answer as it changes. With
// stopAtFirstText, the Stop button is clicked as soon as the answer first shows text, while it streams for sure
// (a click from the test process could come after a fast answer had ended, on a busy machine).
async function sendMessage(page, text, { temperature = '0', maxTokens = '1000', system = '', stopAtFirstText = false } = {}) {
  await page.fill('#temperature', temperature);
  await page.fill('#top_p', '1');
  await page.fill('#max_tokens', maxTokens);
  await page.fill('#system', system);
  await page.evaluate((stopAtFirst) => {
    window.answerUpdates = [];
    new MutationObserver(() => {
      const last = [...document.querySelectorAll('.message.assistant > .content')].at(-1);
      const t = last ? last.textContent : '';
      if (t && t !== window.answerUpdates.at(-1)) window.answerUpdates.push(t);
      if (t && stopAtFirst && window.stopWasVisible === undefined) {
        window.stopWasVisible = !document.getElementById('stop').hidden;
        document.getElementById('stop').click();
      }
    }).observe(document.getElementById('log'), { subtree: true, childList: true, characterData: true });
  }, stopAtFirstText);
  await page.fill('#prompt', text);
  await page.click('#send');
}

// send() marks the page busy before its first await, so once the click returned, idle means the answer is done.
const waitIdle = (page) => page.waitForFunction(() => document.body.dataset.state === 'idle', null, { timeout: 60000 });

test('the page streams an answer, equal to the API answer, and keeps it across a reload', async (t) => {
  const { page, context, problems } = await openPage();
  assert.equal(await page.textContent('#model-name'), MODEL_ID());
  await sendMessage(page, 'Hello', { system: 'You write Python.' });
  await waitIdle(page);
  const updates = await page.evaluate(() => window.answerUpdates);
  const shown = await page.locator('.message.assistant > .content').last().textContent();
  t.diagnostic(`the answer arrived in ${updates.length} updates`);
  assert.ok(updates.length > 1, `the answer arrived in ${updates.length} update(s)`);
  assert.ok(updates.every((u, i) => i === 0 || u.startsWith(updates[i - 1])), 'each update extends the previous one');
  assert.equal(updates.at(-1), shown);

  const api = await fixture.openai.chat.completions.create({
    model: MODEL_ID(),
    messages: [{ role: 'system', content: 'You write Python.' }, { role: 'user', content: 'Hello' }],
    temperature: 0, top_p: 1, max_tokens: 1000,
  });
  assert.equal(shown, api.choices[0].message.content);
  assert.match(await page.locator('.message.assistant .stats').last().textContent(), /finish: (length|stop)/);
  await page.screenshot({ path: path.join(outDir(), 'chat-page.png') });
  await page.evaluate(() => document.getElementById('log').scrollTo(0, 0));
  await page.screenshot({ path: path.join(outDir(), 'chat-page-top.png') });

  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('.message').length === 2);
  assert.equal(await page.locator('.message.user > .content').textContent(), 'Hello');
  assert.equal(await page.locator('.message.assistant > .content').textContent(), shown);
  assert.equal(await page.inputValue('#system'), 'You write Python.');
  assert.deepEqual(problems, []);
  await context.close();
});

test('the stop button ends the answer and the server frees the slot', async () => {
  const { page, context, problems } = await openPage();
  // 2000 tokens take seconds: the stop comes at the first text shown, long before the answer would end.
  await sendMessage(page, 'import os', { maxTokens: '2000', stopAtFirstText: true });
  await waitIdle(page);
  assert.equal(await page.evaluate(() => window.stopWasVisible), true);
  assert.ok(await page.isHidden('#stop'));
  assert.match(await page.locator('.message.assistant .stats').last().textContent(), /finish: stopped/);
  await waitForMetrics(fixture.server, (s) => metricValue(s, 'seedling_slots_in_use') === 0);
  await page.screenshot({ path: path.join(outDir(), 'chat-page-stopped.png') });
  assert.deepEqual(problems, []);
  await context.close();
});

test('<think> content is shown apart from the answer', async () => {
  const { page, context, problems } = await openPage();
  // The demo model does not think, so this answer is canned: the page's parsing is what is under test.
  const pieces = ['<thi', 'nk>Check the ', 'base case.</th', 'ink>', 'return n', ' if n < 2 else 0'];
  const events = pieces.map((p) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: p } }] })}\n\n`);
  await page.route('**/v1/chat/completions', (route) =>
    route.fulfill({ status: 200, contentType: 'text/event-stream', body: events.join('') + 'data: [DONE]\n\n' }),
  );
  await sendMessage(page, 'fib?');
  await waitIdle(page);
  assert.equal(await page.locator('.message.assistant .think .content').textContent(), 'Check the base case.');
  assert.equal(await page.locator('.message.assistant > .content').textContent(), 'return n if n < 2 else 0');
  await page.click('.message.assistant .think summary');
  assert.ok(await page.locator('.message.assistant .think .content').isVisible());
  await page.screenshot({ path: path.join(outDir(), 'chat-page-think.png') });
  assert.deepEqual(problems, []);
  await context.close();
});
