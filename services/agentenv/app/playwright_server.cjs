// Playwright's server for one /playwright connection (agentenv.app.playwright_door).
//
// Run by the node bundled in the playwright wheel, from the app server, with
// everything in its environment (none of it on its command line):
//   AGENTENV_PLAYWRIGHT_PACKAGE  the wheel's playwright-core package folder
//   AGENTENV_PLAYWRIGHT_BRIDGE   the "browser" it launches (agentenv-playwright-bridge)
//   AGENTENV_PLAYWRIGHT_DOWNLOADS  the caller's scope's downloads folder
//   AGENTENV_PLAYWRIGHT_TRACES   this connection's own folder for traces
//   AGENTENV_PLAYWRIGHT_RELAY, AGENTENV_PLAYWRIGHT_TOKEN  handed to the bridge
//   TMPDIR                       this connection's own folder (artifacts, uploads)
// It listens on loopback at a random port and path, prints
// {"ws": "<endpoint>"} on one line, and ends when the bridge does or when
// its standard input closes (the app server went away).
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require(process.env.AGENTENV_PLAYWRIGHT_PACKAGE);

function say(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

async function main() {
  const env = {
    PATH: process.env.PATH || "/usr/bin:/bin",
    AGENTENV_PLAYWRIGHT_RELAY: process.env.AGENTENV_PLAYWRIGHT_RELAY,
  };
  if (process.env.AGENTENV_PLAYWRIGHT_TOKEN)
    env.AGENTENV_PLAYWRIGHT_TOKEN = process.env.AGENTENV_PLAYWRIGHT_TOKEN;
  const server = await chromium.launchServer({
    executablePath: process.env.AGENTENV_PLAYWRIGHT_BRIDGE,
    env,
    headless: true,
    downloadsPath: process.env.AGENTENV_PLAYWRIGHT_DOWNLOADS,
    tracesDir: process.env.AGENTENV_PLAYWRIGHT_TRACES,
    host: "127.0.0.1",
    port: 0,
    handleSIGINT: false,
    handleSIGHUP: false,
    timeout: 30000,
  });
  // Playwright makes its artifacts folder (uploads among them) with
  // mkdtemp, for its own user alone; Chromium (group downloads) reads the
  // uploads the relay lets DOM.setFileInputFiles name; setgid, so what is
  // made in it is group downloads too.
  for (const name of fs.readdirSync(os.tmpdir())) {
    if (name.startsWith("playwright-artifacts-"))
      fs.chmodSync(path.join(os.tmpdir(), name), 0o2750);
  }
  server.on("close", () => process.exit(0));
  process.stdin.on("end", () => {
    server.close().finally(() => process.exit(0));
  });
  process.stdin.resume();
  say({ ws: server.wsEndpoint() });
}

main().catch((error) => {
  const message = String((error && error.message) || error).split("\n").slice(0, 6).join(" ");
  say({ error: message.slice(0, 1500) });
  process.exit(1);
});
