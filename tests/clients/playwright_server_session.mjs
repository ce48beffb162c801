#!/usr/bin/env node
// Playwright for Node through the computer's /playwright (Playwright's own
// remote protocol), with a token (no LLM).
//
//   node tests/clients/playwright_server_session.mjs WS-ENDPOINT TOKEN SITE-URL OUT-DIR
//
// chromium.connect(WS-ENDPOINT, {headers: Authorization}); a new context
// recording video into OUT-DIR, tracing with screenshots; a page at SITE/;
// a file made in the page downloaded and saved with download.saveAs into
// OUT-DIR/download.txt; OUT-DIR/upload.txt given to an <input type=file>
// (setInputFiles) and read back in the page; the trace written to
// OUT-DIR/trace.zip; the page closed and its video saved to OUT-DIR/video.webm.
// Prints one JSON line of what it read and exits 0; on failure prints the
// error and exits 1. Every wait is bounded.
//
// playwright-core comes from build/clients/node22 (scripts/test-clients.sh
// node22), or from $PLAYWRIGHT_CORE_DIR (a folder whose node_modules holds it).

import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const STEP_MS = 15000;
const here = path.dirname(fileURLToPath(import.meta.url));
const base = process.env.PLAYWRIGHT_CORE_DIR || path.join(here, '..', '..', 'build', 'clients', 'node22');
const require = createRequire(path.join(base, 'package.json'));
const { chromium } = require('playwright-core');

async function main() {
  const [endpoint, token, site, out] = process.argv.slice(2);
  if (!endpoint || !token || !site || !out) {
    throw new Error('usage: playwright_server_session.mjs WS-ENDPOINT TOKEN SITE-URL OUT-DIR');
  }
  const browser = await chromium.connect(endpoint, {
    headers: { Authorization: `Bearer ${token}` },
    timeout: 60000,
  });
  const context = await browser.newContext({ recordVideo: { dir: out } });
  context.setDefaultTimeout(STEP_MS);
  await context.tracing.start({ screenshots: true, snapshots: true });
  const page = await context.newPage();
  await page.goto(site + '/', { timeout: STEP_MS });
  const content = fs.readFileSync(path.join(out, 'expected-download.txt'), 'utf8');
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: STEP_MS }),
    page.evaluate((text) => {
      const a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([text]));
      a.download = 'node-report.txt';
      document.body.append(a);
      a.click();
    }, content),
  ]);
  await download.saveAs(path.join(out, 'download.txt'));
  await page.evaluate(() => {
    const input = document.createElement('input');
    input.type = 'file';
    input.id = 'upload';
    document.body.append(input);
  });
  await page.setInputFiles('#upload', path.join(out, 'upload.txt'));
  const uploaded = await page.evaluate(() => document.getElementById('upload').files[0].text());
  await context.tracing.stop({ path: path.join(out, 'trace.zip') });
  const video = page.video();
  await page.close();
  await video.saveAs(path.join(out, 'video.webm'));
  await context.close();
  await browser.close();
  console.log(JSON.stringify({
    version: require('playwright-core/package.json').version,
    suggested: download.suggestedFilename(),
    uploaded,
    title: 'done',
  }));
}

main().catch((error) => {
  console.error(String((error && error.stack) || error).slice(0, 3000));
  process.exit(1);
});
