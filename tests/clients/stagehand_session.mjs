#!/usr/bin/env node
// A scripted Stagehand session (no LLM, no model calls): what Stagehand's
// deterministic page API does over CDP.
//
//   node tests/clients/stagehand_session.mjs WS-ENDPOINT SITE-URL [TOKEN]
//
// Connects with {env: "LOCAL", localBrowserLaunchOptions: {cdpUrl, cdpHeaders}}
// (the token, if given, as an Authorization header), opens a page at SITE/,
// fills #user and types into #search through locators (DOM.enable,
// DOM.getBoxModel, DOM.requestNode: what the first allowlist refused), clicks
// #go, reads #out, takes a screenshot, and closes. Prints one JSON line and
// exits 0; on failure prints the error to stderr and exits 1. The whole run is
// bounded by DEADLINE_MS.
//
// @browserbasehq/stagehand comes from build/clients/node (scripts/test-clients.sh).
import {createRequire} from 'node:module';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const DEADLINE_MS = 90000;
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', '..', 'build', 'clients', 'node', 'x.js'));

async function run(endpoint, site, token) {
  const {Stagehand} = require('@browserbasehq/stagehand');
  const version = require('@browserbasehq/stagehand/package.json').version;
  const launch = {cdpUrl: endpoint};
  if (token) launch.cdpHeaders = {Authorization: `Bearer ${token}`};
  const stagehand = new Stagehand({
    env: 'LOCAL',
    localBrowserLaunchOptions: launch,
    verbose: 0,
    disablePino: true,
  });
  await stagehand.init();
  try {
    const page = await stagehand.context.newPage();
    await page.goto(`${site}/`);
    await page.locator('#user').fill('stagehand-user');
    await page.locator('#search').type('stagehand words');
    await page.locator('#go').click();
    const out = await page.evaluate(() => document.getElementById('out').textContent);
    const user = await page.evaluate(() => document.getElementById('user').value);
    const shot = await page.screenshot();
    await page.close();
    return {client: 'stagehand', stagehand: version, out, user, screenshot_bytes: shot.length};
  } finally {
    await stagehand.close();
  }
}

const [endpoint, site, token] = process.argv.slice(2);
if (!endpoint || !site) {
  process.stderr.write('usage: stagehand_session.mjs WS-ENDPOINT SITE-URL [TOKEN]\n');
  process.exit(2);
}
const deadline = setTimeout(() => {
  process.stderr.write(`stagehand_session: error: gave up after ${DEADLINE_MS} ms\n`);
  process.exit(1);
}, DEADLINE_MS);
try {
  const result = await run(endpoint, site.replace(/\/+$/, ''), token);
  process.stdout.write(JSON.stringify(result) + '\n');
  clearTimeout(deadline);
  process.exit(0);
} catch (error) {
  const message = error && error.message ? error.message : String(error);
  process.stderr.write(`stagehand_session: error: ${message}\n`);
  process.exit(1);
}
