#!/usr/bin/env node
// A scripted Puppeteer session (no LLM): what a Puppeteer agent does over CDP.
//
//   node tests/clients/puppeteer_session.js [--header 'Name=value']... \
//       [--insecure HTTPS-URL] WS-ENDPOINT SITE-URL
//   node tests/clients/puppeteer_session.js --browser-url http://host:port \
//       [--header 'Authorization=Bearer xyz']... SITE-URL
//
// The first form connects with puppeteer.connect({browserWSEndpoint, headers}):
// the WebSocket URL is used as given (query and all) and the headers go on the
// upgrade request. The second uses {browserURL, headers}: Puppeteer 24 fetches
// <origin>/json/version itself (dropping the URL's path and query) and sends
// the headers neither there nor on the WebSocket, so a relay that wants a
// token answers 401 and this script exits 1 with that error.
//
// Opens a page, goes to SITE/, types "alice" into #user, clicks #go, reads
// #out, finds a link and a button by ARIA selectors, takes a screenshot, reads document.title, sets and reads a cookie,
// goes to SITE/next and back, closes the page and disconnects (the browser
// stays up). With --insecure it connects with acceptInsecureCerts and, last,
// opens a second page at HTTPS-URL (a self-signed certificate) and reads its
// title. Prints one JSON line and exits 0; on failure prints the error to
// stderr and exits 1. Every wait is bounded; the whole run by DEADLINE_MS.
//
// puppeteer-core comes from build/clients/node (scripts/test-clients.sh), or
// from $PUPPETEER_CORE_DIR (a folder whose node_modules holds it).
'use strict';

const path = require('node:path');

const STEP_TIMEOUT_MS = 15000;
const DEADLINE_MS = 60000;

function usage() {
  return (
    "usage: puppeteer_session.js [--header 'Name=value']... [--insecure HTTPS-URL] " +
    "WS-ENDPOINT SITE-URL\n" +
    "       puppeteer_session.js --browser-url URL [--header 'Name=value']... SITE-URL"
  );
}

function parseArgs(argv) {
  const opts = {browserURL: null, headers: {}, positional: [], insecure: null};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--browser-url' || arg === '--header' || arg === '--insecure') {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value\n${usage()}`);
      if (arg === '--insecure') {
        opts.insecure = value;
      } else if (arg === '--browser-url') {
        opts.browserURL = value;
      } else {
        const eq = value.indexOf('=');
        if (eq <= 0) throw new Error(`--header wants Name=value, got '${value}'`);
        opts.headers[value.slice(0, eq)] = value.slice(eq + 1);
      }
    } else if (arg === '-h' || arg === '--help') {
      process.stdout.write(usage() + '\n');
      process.exit(0);
    } else {
      opts.positional.push(arg);
    }
  }
  const want = opts.browserURL ? 1 : 2;
  if (opts.positional.length !== want) throw new Error(usage());
  if (opts.browserURL) {
    opts.site = opts.positional[0];
  } else {
    [opts.browserWSEndpoint, opts.site] = opts.positional;
  }
  opts.site = opts.site.replace(/\/+$/, '');
  return opts;
}

function loadPuppeteer() {
  const roots = [
    process.env.PUPPETEER_CORE_DIR,
    path.join(__dirname, '..', '..', 'build', 'clients', 'node'),
    __dirname,
  ].filter(Boolean);
  let manifest;
  try {
    manifest = require.resolve('puppeteer-core/package.json', {paths: roots});
  } catch {
    throw new Error(
      'puppeteer-core not found: run scripts/test-clients.sh node ' +
        '(or set PUPPETEER_CORE_DIR)',
    );
  }
  return {
    puppeteer: require(path.dirname(manifest)),
    version: require(manifest).version,
  };
}

async function run(opts) {
  const {puppeteer, version: puppeteerVersion} = loadPuppeteer();
  const connectOptions = {defaultViewport: null, protocolTimeout: STEP_TIMEOUT_MS};
  if (opts.insecure) connectOptions.acceptInsecureCerts = true;
  if (opts.browserURL) {
    connectOptions.browserURL = opts.browserURL;
    connectOptions.headers = opts.headers;
  } else {
    connectOptions.browserWSEndpoint = opts.browserWSEndpoint;
    if (Object.keys(opts.headers).length) connectOptions.headers = opts.headers;
  }
  const browser = await puppeteer.connect(connectOptions);
  try {
    const version = await browser.version();
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.setDefaultNavigationTimeout(STEP_TIMEOUT_MS);

    await page.goto(`${opts.site}/`, {waitUntil: 'load'});
    await page.type('#user', 'alice');
    const user = await page.$eval('#user', el => el.value);
    await page.click('#go');
    await page.waitForFunction(
      () => document.getElementById('out').textContent !== '',
      {timeout: STEP_TIMEOUT_MS},
    );
    const out = await page.$eval('#out', el => el.textContent);
    // ARIA selectors (Accessibility.queryAXTree, refused by the first allowlist).
    const byAria = await page.$('aria/Next page');
    const ariaText = byAria ? await byAria.evaluate(el => el.textContent) : null;
    const pAria = await page.$('::-p-aria(Go)');
    const pAriaId = pAria ? await pAria.evaluate(el => el.id) : null;
    const screenshot = await page.screenshot({type: 'png'});
    const title = await page.evaluate(() => document.title);

    await page.setCookie({name: 'session', value: 'alice-cookie', url: `${opts.site}/`});
    const cookies = await page.cookies();

    await page.goto(`${opts.site}/next`, {waitUntil: 'load'});
    const nextTitle = await page.title();
    await page.goBack({waitUntil: 'load'});
    const backUrl = page.url();
    const backTitle = await page.title();

    await page.close();
    let insecureTitle = null;
    if (opts.insecure) {
      const tls = await browser.newPage();
      await tls.goto(opts.insecure, {waitUntil: 'load'});
      insecureTitle = await tls.title();
      await tls.close();
    }
    return {
      client: 'puppeteer',
      puppeteer: puppeteerVersion,
      browser: version,
      title,
      user,
      out,
      aria_text: ariaText,
      p_aria_id: pAriaId,
      screenshot_bytes: screenshot.length,
      cookies: cookies.length,
      cookie_names: cookies.map(c => c.name).sort(),
      next_title: nextTitle,
      back_url: backUrl,
      back_title: backTitle,
      insecure_title: insecureTitle,
    };
  } finally {
    await browser.disconnect();
  }
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`puppeteer_session: ${error.message}\n`);
    process.exit(2);
  }
  const deadline = setTimeout(() => {
    process.stderr.write(`puppeteer_session: error: gave up after ${DEADLINE_MS} ms\n`);
    process.exit(1);
  }, DEADLINE_MS);
  try {
    const result = await run(opts);
    process.stdout.write(JSON.stringify(result) + '\n');
    clearTimeout(deadline);
    process.exit(0);
  } catch (error) {
    const message = error && error.message ? error.message : String(error);
    process.stderr.write(`puppeteer_session: error: ${message}\n`);
    process.exit(1);
  }
}

main();
