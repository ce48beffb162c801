"""The live view's page (``GET /live``): frames drawn in an ``<img>``, and, for
a person's token, their pointer, keys, text and paste sent as inputs.

- **The page never embeds the page it shows.** It draws JPEG frames
  (``/live/frame``) into an image; the watched page's script, title and URL
  never run or render as markup in the view's origin: tab titles and URLs
  are set as ``textContent`` only. Its own Content-Security-Policy allows
  its one inline script, ``fetch`` to its own origin and ``blob:`` images,
  nothing else; the server's headers forbid framing it.
- **Input** (only when the server said the token may drive, ``DRIVES``;
  the server checks again on every input): ``mousedown``/``mouseup`` as
  ``down``/``up`` at the frame's pixel (the image's natural size, so a
  scaled view still hits the right pixel), with the click count; ``wheel``
  (consecutive ones summed); a ``move`` when the pointer rests 150 ms, or
  at most 10 a second while a button is held (hover menus and drags work,
  and the record is no stream of moves); printable keys gathered into
  ``text`` (sent after 300 ms of no typing, or before any other input);
  named keys and shortcuts as ``key`` (``ctrl+a``, ``shift+Tab``,
  ``Enter``); a paste as ``text``; text an input method composed (IME:
  Japanese, Chinese, accents) as ``text`` once composed; a click on a
  tab's button as ``tab``;
  the person's word to an agent that asked for one (``request_human``,
  shown above the picture with its reason, as text) as ``answer``.
- Inputs are sent one at a time, in order (a queue); a move waiting in the
  queue is replaced by a later one.
- The keyboard goes to a hidden ``<textarea id="keys">`` over the picture,
  focused by a click on it: an image cannot be edited, so an input method
  would never compose there. Its text is never kept: keys are sent as they
  come, a composition when it ends.
- The token comes as ``?token=``; the page drops it from its address bar
  and sends it as a header.
"""

from __future__ import annotations

from agentenv.app.live import DRIVE_FPS, DRIVING_S, FPS

__all__ = ["live_page"]


def live_page(drives: bool) -> str:
    """The page, for a token that may drive (a person's) or only watch."""
    return (
        _PAGE.replace("__FPS__", str(FPS))
        .replace("__DRIVE_FPS__", str(DRIVE_FPS))
        .replace("__DRIVING_MS__", str(int(DRIVING_S * 1000)))
        .replace("__DRIVES__", "true" if drives else "false")
    )


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; connect-src 'self'; img-src blob:; style-src 'unsafe-inline';
 script-src 'unsafe-inline'; form-action 'none'; base-uri 'none'">
<title>agentenv live</title>
<style>
 body { margin: 0; background: #222; color: #ddd; font: 13px system-ui, sans-serif; }
 #tabs { display: flex; gap: 4px; padding: 2px 8px; min-height: 24px; overflow-x: auto; }
 #tabs button { max-width: 220px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis;
   background: #333; color: #ddd; border: 1px solid #555; border-radius: 3px; }
 #tabs button.active { background: #555; font-weight: bold; }
 #screen { display: block; max-width: 100vw; max-height: calc(100vh - 52px); margin: 0 auto;
   user-select: none; }
 #screen.drives { cursor: crosshair; }
 #screen.focused { outline: 2px solid #4af; }
 #keys { position: fixed; left: 0; top: 0; width: 1px; height: 1px; opacity: 0; border: 0;
   padding: 0; resize: none; overflow: hidden; pointer-events: none; }
 #status { height: 24px; line-height: 24px; padding: 0 8px; }
 #request { padding: 4px 8px; background: #553; }
</style></head>
<body>
<div id="tabs"></div>
<div id="request" hidden><span id="reason"></span>
 <button id="done">done: hand back</button> <button id="cannot">cannot</button></div>
<img id="screen" alt="the active tab" draggable="false">
<textarea id="keys" aria-label="the keyboard, to the watched tab" autocomplete="off"
 autocapitalize="off" spellcheck="false" hidden></textarea>
<div id="status">connecting…</div>
<script>
"use strict";
const DRIVES = __DRIVES__;
const query = new URLSearchParams(location.search);
const token = query.get("token");
const scope = query.get("scope");
const scoped = scope ? "?scope=" + encodeURIComponent(scope) : "";
if (token) history.replaceState(null, "", location.pathname + scoped);  // not in the address bar
const headers = token ? {Authorization: "Bearer " + token} : {};
const screen = document.getElementById("screen");
const keys = document.getElementById("keys");
const status = document.getElementById("status");
const bar = document.getElementById("tabs");
const asking = document.getElementById("request");
const every = 1000 / __FPS__;
// While the person acts (and __DRIVING_MS__ ms after), frames come faster,
// and a frame is fetched as soon as an input is done: they see it sooner.
const driveEvery = 1000 / __DRIVE_FPS__;
let acted = -1e9, due = false, wake = null;
const QUICK = 33;
let frames = 0, sent = 0, refused = 0, undecoded = 0;

async function said(answer) {
  let message = answer.status + "";
  try { message = (await answer.json()).error.message; } catch (e) {}
  return message;
}
async function once() {
  const answer = await fetch("/live/frame" + scoped, {headers, cache: "no-store"});
  if (!answer.ok) { status.textContent = await said(answer); return; }
  const url = URL.createObjectURL(await answer.blob());
  // A frame shows only once it decodes: one that cannot would leave a broken
  // picture, a box of another size, where a click lands on no pixel.
  try { const next = new Image(); next.src = url; await next.decode(); } catch (e) {
    URL.revokeObjectURL(url);
    undecoded += 1; screen.dataset.undecoded = String(undecoded);
    status.textContent = "a frame did not decode; showing the last one";
    return;
  }
  await new Promise((done) => {
    screen.onload = screen.onerror = () => { URL.revokeObjectURL(url); done(); };
    screen.src = url;
  });
  frames += 1;
  screen.dataset.frames = String(frames);
  status.textContent = (DRIVES ? "live · you can act · " : "live · watching · ")
    + new Date().toLocaleTimeString();
}
async function loop() {
  for (;;) {
    const began = performance.now();
    due = false;
    if (!document.hidden) {
      try { await once(); } catch (e) { status.textContent = "the computer is not answering"; }
    }
    // An input done while this frame was fetched: the next one at once (at
    // most every QUICK ms), else at the driving or the watching pace.
    const pace = due ? QUICK : performance.now() - acted < __DRIVING_MS__ ? driveEvery : every;
    const rest = pace - (performance.now() - began);
    if (rest > 0) {
      await new Promise((r) => { wake = r; setTimeout(r, Math.max(due ? 0 : 20, rest)); });
    }
    wake = null;
  }
}
async function tabs() {
  if (document.hidden) return;
  let list, asked;
  try {
    const answer = await fetch("/live/tabs" + scoped, {headers, cache: "no-store"});
    if (!answer.ok) return;
    ({tabs: list, request: asked} = await answer.json());
  } catch (e) { return; }
  asking.hidden = !asked;
  document.getElementById("reason").textContent =  // text, never markup
    asked ? asked.who + " asks for a person: " + asked.reason : "";
  bar.replaceChildren(...list.map((tab) => {
    const button = document.createElement("button");
    button.textContent = tab.title || tab.url || "(blank)";  // text, never markup
    button.title = tab.url;
    button.dataset.tab = tab.id;
    if (tab.active) button.className = "active";
    button.disabled = !DRIVES;
    button.addEventListener("click", () => {
      flushText(); send({kind: "tab", id: tab.id}); keys.focus();
    });
    return button;
  }));
}

// -- input (a person's token only; the server checks each one again) --------
const queue = [];
let sending = false;
function send(input) {
  if (!DRIVES) return;
  const last = queue[queue.length - 1];
  if (last && last.kind === "move" && input.kind === "move") queue[queue.length - 1] = input;
  else if (last && last.kind === "wheel" && input.kind === "wheel") {
    last.dx += input.dx; last.dy += input.dy;
  }
  else queue.push(input);
  pump();
}
async function pump() {
  if (sending) return;
  sending = true;
  while (queue.length) {
    const input = queue.shift();
    try {
      const answer = await fetch("/live/input" + scoped, {
        method: "POST", cache: "no-store", body: JSON.stringify(input),
        headers: {...headers, "Content-Type": "application/json"},
      });
      if (answer.ok) {
        sent += 1; screen.dataset.sent = String(sent);
        acted = performance.now(); due = true;  // its effect, in the next frame now
        if (wake) wake();
      }
      else {
        refused += 1; screen.dataset.refused = String(refused);
        status.textContent = await said(answer);
      }
    } catch (e) { status.textContent = "the computer is not answering"; }
  }
  sending = false;
  screen.dataset.idle = "1";
}
function point(e) {
  const r = screen.getBoundingClientRect();
  const w = screen.naturalWidth || r.width, h = screen.naturalHeight || r.height;
  const x = Math.round((e.clientX - r.left) * w / r.width);
  const y = Math.round((e.clientY - r.top) * h / r.height);
  return {x: Math.min(Math.max(0, x), w), y: Math.min(Math.max(0, y), h)};
}
const BUTTONS = ["left", "middle", "right"];
let held = false, resting = null, lastMove = 0, text = "", typing = null;
function flushText() {
  clearTimeout(typing);
  if (text) { const t = text; text = ""; send({kind: "text", text: t}); }
}
function button(e) { return BUTTONS[e.button] || "left"; }
function clicks(e) { return Math.min(3, Math.max(1, e.detail || 1)); }
const NAMED = {
  Enter: "Enter", Tab: "Tab", Backspace: "Backspace", Delete: "Delete", Escape: "Escape",
  ArrowUp: "ArrowUp", ArrowDown: "ArrowDown", ArrowLeft: "ArrowLeft", ArrowRight: "ArrowRight",
  Home: "Home", End: "End", PageUp: "PageUp", PageDown: "PageDown", Insert: "Insert", " ": "Space",
};
for (const word of ["done", "cannot"]) {
  const button = document.getElementById(word);
  button.disabled = !DRIVES;
  button.addEventListener("click", () => {
    flushText(); send({kind: "answer", word}); asking.hidden = true; keys.focus();
  });
}
if (DRIVES) {
  keys.hidden = false;
  screen.classList.add("drives");
  keys.addEventListener("focus", () => screen.classList.add("focused"));
  keys.addEventListener("blur", () => screen.classList.remove("focused"));
  screen.addEventListener("mousedown", (e) => {
    e.preventDefault();
    // The input method's window shows where the person clicked.
    keys.style.left = e.clientX + "px"; keys.style.top = e.clientY + "px";
    keys.focus(); clearTimeout(resting); flushText();
    held = true;
    send({kind: "down", ...point(e), button: button(e), clicks: clicks(e)});
  });
  screen.addEventListener("mouseup", (e) => {
    e.preventDefault(); clearTimeout(resting); held = false;
    send({kind: "up", ...point(e), button: button(e), clicks: clicks(e)});
  });
  screen.addEventListener("mousemove", (e) => {
    const at = point(e);
    clearTimeout(resting);
    if (held) {
      if (performance.now() - lastMove >= 100) {
        lastMove = performance.now(); send({kind: "move", ...at});
      }
      return;
    }
    resting = setTimeout(() => send({kind: "move", ...at}), 150);
  });
  screen.addEventListener("wheel", (e) => {
    e.preventDefault(); flushText();
    send({kind: "wheel", ...point(e), dx: Math.round(e.deltaX), dy: Math.round(e.deltaY)});
  }, {passive: false});
  screen.addEventListener("contextmenu", (e) => e.preventDefault());
  keys.addEventListener("keydown", (e) => {
    if (e.isComposing || e.keyCode === 229) return;  // the input method's: sent when composed
    const mods = (e.ctrlKey ? "ctrl+" : "") + (e.altKey ? "alt+" : "") + (e.metaKey ? "meta+" : "");
    if (mods && (e.key === "v" || e.key === "V")) return;  // a paste: the paste event sends it
    if (!mods && e.key.length === 1) {
      e.preventDefault();
      text += e.key;
      clearTimeout(typing);
      typing = setTimeout(flushText, 300);
      return;
    }
    let name = NAMED[e.key] || (/^F([1-9]|1[0-2])$/.test(e.key) ? e.key : null);
    if (!name && mods && e.key.length === 1) name = e.key.toLowerCase();
    if (!name) return;  // a modifier alone, or a key with no name here
    e.preventDefault(); flushText();
    send({kind: "key", keys: mods + (e.shiftKey ? "shift+" : "") + name});
  });
  keys.addEventListener("compositionend", (e) => {
    keys.value = "";
    if (e.data) { flushText(); send({kind: "text", text: e.data}); }
  });
  keys.addEventListener("input", (e) => { if (!e.isComposing) keys.value = ""; });
  keys.addEventListener("paste", (e) => {
    e.preventDefault();
    const pasted = e.clipboardData ? e.clipboardData.getData("text/plain") : "";
    if (pasted) { flushText(); send({kind: "text", text: pasted}); }
  });
}
loop();
tabs();
setInterval(tabs, 1000);
</script>
</body></html>
"""
