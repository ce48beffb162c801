#!/usr/bin/env node
// Playwright-for-Node's CDP sessions over CDP, with a token (no LLM).
//
//   node tests/clients/playwright_cdp_sessions.mjs HTTP-ENDPOINT TOKEN SITE-URL OTHER-TARGET
//
// connectOverCDP(HTTP-ENDPOINT, {headers: Authorization}); in the default
// context a new page at SITE/, then:
// - context.newCDPSession(page): Runtime.evaluate, DOM.getDocument,
//   Accessibility.getFullAXTree, Target.getTargetInfo (the page's own),
//   then detach;
// - browser.newBrowserCDPSession(): Target.getTargets, Target.setDiscoverTargets
//   (the targetCreated events it hears), an attach to OTHER-TARGET (another
//   scope's page: its error is printed), Browser.getBrowserCommandLine (its
//   error), Target.createTarget at SITE/next (its context), closeTarget, detach.
// Prints one JSON line of what it read and exits 0; on failure prints the
// error and exits 1. Every wait is bounded.
//
// playwright-core comes from build/clients/node22 (scripts/test-clients.sh
// node22), or from $PLAYWRIGHT_CORE_DIR (a folder whose node_modules holds it).

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const STEP_MS = 15000;
const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.PLAYWRIGHT_CORE_DIR || path.join(here, '..', '..', 'build', 'clients', 'node22');
const require = createRequire(path.join(base, 'package.json'));
const { chromium } = require('playwright-core');

// A promise bounded by STEP_MS.
function bounded(promise, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${STEP_MS} ms`)), STEP_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// The error message a command fails with (null if it answered).
async function refusal(session, method, params) {
  try {
    await bounded(session.send(method, params), method);
    return null;
  } catch (error) {
    return String(error && error.message ? error.message : error);
  }
}

async function main() {
  const [endpoint, token, site, other] = process.argv.slice(2);
  if (!endpoint || !token || !site || !other) {
    throw new Error('usage: playwright_cdp_sessions.mjs HTTP-ENDPOINT TOKEN SITE-URL OTHER-TARGET');
  }
  const browser = await chromium.connectOverCDP(endpoint, {
    headers: { Authorization: `Bearer ${token}` },
    timeout: 30000,
  });
  const context = browser.contexts()[0];
  context.setDefaultTimeout(STEP_MS);
  const page = await context.newPage();
  await page.goto(site + '/', { timeout: STEP_MS });

  const session = await bounded(context.newCDPSession(page), 'newCDPSession');
  const title = await bounded(
    session.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true }),
    'Runtime.evaluate');
  const doc = await bounded(session.send('DOM.getDocument', { depth: 2 }), 'DOM.getDocument');
  const tree = await bounded(session.send('Accessibility.getFullAXTree'), 'getFullAXTree');
  const mine = (await bounded(session.send('Target.getTargetInfo'), 'getTargetInfo')).targetInfo;
  await bounded(session.detach(), 'detach');

  const whole = await bounded(browser.newBrowserCDPSession(), 'newBrowserCDPSession');
  const heard = [];
  whole.on('Target.targetCreated', (event) => heard.push(event.targetInfo.targetId));
  const listed = (await bounded(whole.send('Target.getTargets'), 'getTargets')).targetInfos;
  await bounded(whole.send('Target.setDiscoverTargets', { discover: true }), 'setDiscoverTargets');
  const end = Date.now() + STEP_MS;
  while (!heard.includes(mine.targetId) && Date.now() < end) {
    await new Promise((done) => setTimeout(done, 50));
  }
  const attachOther = await refusal(whole, 'Target.attachToTarget', { targetId: other, flatten: true });
  const commandLine = await refusal(whole, 'Browser.getBrowserCommandLine');
  const made = await bounded(whole.send('Target.createTarget', { url: site + '/next' }), 'createTarget');
  const madeInfo = (await bounded(
    whole.send('Target.getTargetInfo', { targetId: made.targetId }), 'getTargetInfo')).targetInfo;
  await bounded(whole.send('Target.closeTarget', { targetId: made.targetId }), 'closeTarget');
  await bounded(whole.detach(), 'detach');
  await page.close();
  await browser.close(); // connected over CDP: disconnects, the browser stays up
  console.log(JSON.stringify({
    version: require('playwright-core/package.json').version,
    title: title.result.value,
    document: doc.root.nodeName,
    axNames: tree.nodes.map((n) => (n.name && n.name.value) || '').filter(Boolean),
    mine: { targetId: mine.targetId, browserContextId: mine.browserContextId },
    listed: listed.map((t) => ({ targetId: t.targetId, browserContextId: t.browserContextId })),
    heard,
    attachOther,
    commandLine,
    made: { targetId: made.targetId, browserContextId: madeInfo.browserContextId },
  }));
}

main().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
