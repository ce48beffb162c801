#!/usr/bin/env node
// A scripted Playwright-for-Node session (no LLM) over CDP, with a token.
//
//   node tests/clients/playwright_session.mjs HTTP-ENDPOINT TOKEN SITE-URL TRACE-ZIP
//
// connectOverCDP(HTTP-ENDPOINT, {headers: Authorization}) and, in the
// default context: a new page at SITE/, types into #search, clicks #go,
// reads #out, finds the Next link by role, adds and reads a cookie, takes a
// screenshot, records a trace with screenshots (written to TRACE-ZIP), goes
// to SITE/next and back, closes the page and disconnects (the browser stays
// up). Prints one JSON line of what it read and exits 0; on failure prints
// the error and exits 1. Every wait is bounded.
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

async function main() {
  const [endpoint, token, site, traceZip] = process.argv.slice(2);
  if (!endpoint || !token || !site || !traceZip) {
    throw new Error('usage: playwright_session.mjs HTTP-ENDPOINT TOKEN SITE-URL TRACE-ZIP');
  }
  const browser = await chromium.connectOverCDP(endpoint, {
    headers: { Authorization: `Bearer ${token}` },
    timeout: 30000,
  });
  const context = browser.contexts()[0];
  context.setDefaultTimeout(STEP_MS);
  await context.tracing.start({ screenshots: true, snapshots: true });
  const page = await context.newPage();
  await page.goto(site + '/', { timeout: STEP_MS });
  await page.fill('#search', 'node words');
  await page.click('#go');
  const out = await page.textContent('#out');
  const link = await page.getByRole('link', { name: 'Next page' }).count();
  await context.addCookies([{ name: 'pw_node', value: 'playwright-node-cookie', url: site }]);
  const cookies = (await context.cookies(site)).map((c) => c.name).sort();
  const shot = await page.screenshot();
  await page.goto(site + '/next', { timeout: STEP_MS });
  const nextTitle = await page.title();
  await page.goBack({ timeout: STEP_MS });
  const backTitle = await page.title();
  await context.tracing.stop({ path: traceZip });
  await page.close();
  await browser.close(); // connected over CDP: disconnects, the browser stays up
  console.log(JSON.stringify({
    version: require('playwright-core/package.json').version,
    out, link, cookies, screenshot: shot.length, nextTitle, backTitle,
  }));
}

main().catch((error) => {
  console.error(String(error && error.stack ? error.stack : error));
  process.exit(1);
});
