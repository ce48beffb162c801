"""``agentenv view RECORDING``: one self-contained HTML file to look at a recording.

The frames on a timeline, each with what the agent did before it in the
words of :mod:`.words` (typing folded into words; a ``person`` frame, what a
person did through the live view), the tab events since the
previous frame with their causes, who acted, and times; the video, when the
recording has one, with the log beside it: choosing a frame or a log entry
seeks the video there, and playing marks the frame and the entry reached. Arrow keys (or
``j``/``k``) step through it; it needs no server and loads nothing from the
network: images are inlined as ``data:`` URLs and the data as JSON in the page.

``RECORDING`` is a recording's folder (``manifest.json``, ``log.jsonl``,
``frames/``: a run folder's ``recordings/<recording_id>/``) or its place in
a store, ``s3://bucket/prefix/<recording_id>`` (read with the standard AWS
environment and config). :func:`render` is pure; :func:`view` does the I/O.
"""

from __future__ import annotations

import base64
import bisect
import html
import json
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentenv.harness.store import download_recording, safe_name
from agentenv.harness.words import person_words, step_words
from agentenv.protocol.log import LogLine, TabBody, agent_act, person_act, read_lines, tab_of
from agentenv.protocol.recording import BrowserRecordingManifest

__all__ = ["LOG_SHOWN", "frame_items", "log_items", "render", "script_json", "view"]

#: Log entries the page lists, at most (the rest are in ``log.jsonl``).
LOG_SHOWN = 5000


def _cause(by: Any) -> str:
    if not isinstance(by, Mapping):
        return ""
    kind = by.get("kind")
    if kind == "command":
        who = f" ({by.get('who')})" if by.get("who") else ""
        return f"by entry {by.get('entry')}{who}"
    if kind == "page":
        after = by.get("after")
        return f"by the page, after entry {after}" if after is not None else "by the page"
    if kind == "agentenv":
        return "by the computer"
    return f"by {kind}" if kind else ""


def _event(event: TabBody) -> str:
    return f"{event.get('event')} {event.get('url') or ''} {_cause(event.get('by'))}".strip()


def frame_items(
    manifest: BrowserRecordingManifest, lines: Iterable[LogLine]
) -> list[dict[str, Any]]:
    """One item per frame: its picture's file and what happened before it."""
    by_seq = {x["seq"]: x for x in lines}
    tab_lines = [(s, x["at"], tab) for s, x in sorted(by_seq.items()) if (tab := tab_of(x))]
    previous_at = ""
    items: list[dict[str, Any]] = []
    previous = manifest.start_seq or 0
    for frame in manifest.frames:
        if frame.after:
            boundary = max(frame.after)
        elif frame.kind == "last" and manifest.end_seq is not None:
            boundary = manifest.end_seq
        else:
            boundary = previous
        entries = [by_seq[s] for s in frame.after if s in by_seq]
        acts = [a for e in entries if (a := agent_act(e) or person_act(e)) is not None]
        if frame.at:  # the tab events that happened before the frame was taken
            events = [_event(tab) for _s, at, tab in tab_lines if previous_at < at <= frame.at]
            previous_at = frame.at
        else:  # a manifest rebuilt from a store: no times, so by entry number
            events = [_event(tab) for s, _at, tab in tab_lines if previous < s <= boundary]
        previous = max(previous, boundary)
        items.append(
            {
                "index": frame.index,
                "kind": frame.kind or "frame",
                "at": frame.at or "",
                "url": frame.url or "",
                "file": None if frame.error else frame.file,
                "error": frame.error,
                "words": person_words(entries) if frame.kind == "person" else step_words(entries),
                "who": sorted({a["who"] for a in acts if a.get("who")}),
                "entries": len(entries),
                "events": events,
            }
        )
    return items


def log_items(
    lines: Iterable[LogLine], items: list[dict[str, Any]], times: Mapping[str, float]
) -> list[dict[str, Any]]:
    """One item per agent's act or tab event, in the log's order (up to
    :data:`LOG_SHOWN`): its words, who, its time in the video (``times``,
    the manifest's ``entries_at``), and the frame after it (a position in
    ``items``), so choosing it shows that frame and seeks the video there."""
    out: list[dict[str, Any]] = []
    timed = [(item["at"], i) for i, item in enumerate(items) if item["at"]]
    frame_ats = [at for at, _ in timed]
    for line in lines:
        act, tab, said = agent_act(line), tab_of(line), []
        if act is None and (person := person_act(line)) is not None:
            said = person_words([line])  # a person's step, said (the pointer's moves are not)
            act = person if said else None
        if act is None and tab is None:
            continue
        if len(out) == LOG_SHOWN:
            break
        at = str(line.get("at") or "")
        if act is not None:
            said = said or step_words([line])
            text = "; ".join(said) or str(act.get("method") or act.get("tool") or act.get("op"))
        else:
            assert tab is not None
            text = _event(tab)
        after = bisect.bisect_left(frame_ats, at)  # the first frame taken at or after it
        frame = timed[after][1] if after < len(timed) else None
        out.append(
            {
                "seq": line["seq"],
                "at": at,
                "who": str(act.get("who") or "") if act is not None else "",
                "text": text,
                "video_at": times.get(str(line["seq"])),
                "frame": frame,
            }
        )
    return out


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; img-src data:; media-src data:;
  style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>__TITLE__</title>
<style>
 body { margin: 0; font: 14px/1.4 system-ui, sans-serif; display: flex; height: 100vh; }
 #timeline { width: 34%; overflow-y: auto; border-right: 1px solid #ccc; margin: 0; padding: 0; }
 #timeline li { list-style: none; padding: 8px 10px; border-bottom: 1px solid #eee; }
 #timeline li { cursor: pointer; }
 #timeline li.current { background: #e8f0fe; }
 #timeline li .meta { color: #666; font-size: 12px; }
 #timeline li.missing { color: #a00; }
 #timeline li.playing { border-left: 4px solid #1a73e8; }
 #player { max-width: 100%; display: block; margin-bottom: 8px; }
 #log ol { max-height: 30vh; overflow-y: auto; padding: 0; margin: 0; }
 #log li { list-style: none; cursor: pointer; padding: 1px 4px; }
 #log li.playing { background: #fff3c4; }
 main { flex: 1; overflow: auto; padding: 12px; }
 main img { max-width: 100%; border: 1px solid #ccc; }
 h1 { font-size: 16px; margin: 0 0 8px; }
 .events { color: #555; font-size: 13px; }
 section { margin-top: 16px; font-size: 13px; }
 table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; }
 td:last-child { word-break: break-all; }
</style></head>
<body>
<ol id="timeline" aria-label="frames"></ol>
<main>
 <video id="player" controls muted hidden></video>
 <h1 id="heading"></h1>
 <div id="detail"></div>
 <p id="url"></p>
 <img id="picture" alt="">
 <ul id="events" class="events"></ul>
 <section id="log" hidden><h1></h1><ol aria-label="log"></ol></section>
 <section id="downloads" hidden><h1>Downloads</h1><ul></ul></section>
 <section id="network" hidden><h1></h1>
  <table><thead><tr><th>status</th><th>method</th><th>ms</th><th>URL</th></tr></thead>
  <tbody></tbody></table></section>
</main>
<script type="application/json" id="data">__DATA__</script>
<script>
const data = JSON.parse(document.getElementById("data").textContent);
const list = document.getElementById("timeline");
let current = 0;
function text(el, value) { el.textContent = value; return el; }
data.items.forEach((item, i) => {
  const li = document.createElement("li");
  li.dataset.index = i;
  if (!item.file) li.classList.add("missing");
  const what = item.words.length ? item.words.join("; ") : "(" + item.kind + " frame)";
  li.appendChild(text(document.createElement("div"), "#" + item.index + " " + what));
  const who = item.who.length ? " · " + item.who.join(", ") : "";
  li.appendChild(text(document.createElement("div"), item.kind + " · " + item.at + who))
    .className = "meta";
  li.addEventListener("click", () => show(i));
  list.appendChild(li);
});
function show(i) {
  if (!data.items.length) return;
  current = Math.max(0, Math.min(data.items.length - 1, i));
  const item = data.items[current];
  list.querySelectorAll("li").forEach((li) =>
    li.classList.toggle("current", Number(li.dataset.index) === current));
  list.children[current].scrollIntoView({block: "nearest"});
  text(document.getElementById("heading"),
    "Frame " + item.index + " of " + data.items.length + " (" + item.kind + ") at " + item.at);
  const detail = document.getElementById("detail");
  detail.replaceChildren();
  const did = item.words.length ? item.words : ["(no action)"];
  did.forEach((w) => detail.appendChild(text(document.createElement("div"), w)));
  if (item.who.length) {
    detail.appendChild(text(document.createElement("div"), "by " + item.who.join(", ")));
  }
  text(document.getElementById("url"), item.url);
  const picture = document.getElementById("picture");
  if (item.file) { picture.src = data.images[item.file]; picture.alt = "frame " + item.index; }
  else { picture.removeAttribute("src"); picture.alt = "missing: " + (item.error || ""); }
  const events = document.getElementById("events");
  events.replaceChildren();
  item.events.forEach((e) => events.appendChild(text(document.createElement("li"), e)));
  if (data.video.length && item.video_at !== null) seekTo(item.video_at);
}
document.addEventListener("keydown", (e) => {
  if (["ArrowDown", "ArrowRight", "j"].includes(e.key)) { show(current + 1); e.preventDefault(); }
  if (["ArrowUp", "ArrowLeft", "k"].includes(e.key)) { show(current - 1); e.preventDefault(); }
  if (e.key === "Home") show(0);
  if (e.key === "End") show(data.items.length - 1);
});
const player = document.getElementById("player");
let chunk = -1;
const logList = document.querySelector("#log ol");
let logPlaying = -1;
if (data.log.length) {
  const box = document.getElementById("log");
  box.hidden = false;
  const more = data.log_more ? " (the first " + data.log.length + "; the rest in log.jsonl)" : "";
  text(box.querySelector("h1"), "Log: " + data.log.length + " entries" + more);
  data.log.forEach((e) => {
    const who = e.who ? " · " + e.who : "";
    const li = text(document.createElement("li"), "#" + e.seq + " " + e.at + who + " · " + e.text);
    li.addEventListener("click", () => {
      if (e.frame !== null) show(e.frame);
      if (data.video.length && e.video_at !== null) seekTo(e.video_at);
    });
    logList.appendChild(li);
  });
}
function chunkAt(t) {
  let c = 0;
  data.video.forEach((v, n) => { if (v.offset_s <= t) c = n; });
  return c;
}
function seekTo(t) {
  const c = chunkAt(t);
  const into = Math.max(0, t - data.video[c].offset_s);
  if (c !== chunk) {
    chunk = c; player.src = data.video[c].href;
    player.addEventListener("loadedmetadata", () => { player.currentTime = into; }, {once: true});
  } else { player.currentTime = into; }
}
if (data.video.length) {
  player.hidden = false;
  player.addEventListener("timeupdate", () => {
    const t = data.video[chunk].offset_s + player.currentTime;
    let playing = -1;
    data.items.forEach((item, i) => {
      if (item.video_at !== null && item.video_at <= t) playing = i;
    });
    list.querySelectorAll("li").forEach((li) =>
      li.classList.toggle("playing", Number(li.dataset.index) === playing));
    let reached = -1;
    data.log.forEach((e, i) => { if (e.video_at !== null && e.video_at <= t) reached = i; });
    if (reached !== logPlaying) {
      if (logPlaying >= 0) logList.children[logPlaying].classList.remove("playing");
      if (reached >= 0) {
        logList.children[reached].classList.add("playing");
        logList.children[reached].scrollIntoView({block: "nearest"});
      }
      logPlaying = reached;
    }
  });
  player.addEventListener("ended", () => {
    if (chunk + 1 < data.video.length) { seekTo(data.video[chunk + 1].offset_s); player.play(); }
  });
  seekTo(0);
}
show(0);
if (data.downloads.length) {
  const box = document.getElementById("downloads");
  box.hidden = false;
  data.downloads.forEach((d) => {
    const li = document.createElement("li");
    if (d.href) {
      const a = text(document.createElement("a"), d.name);
      a.href = d.href; a.download = d.name; li.appendChild(a);
    } else { text(li, d.name); }
    const note = d.note ? " · " + d.note : "";
    li.appendChild(document.createTextNode(" · " + d.bytes + " bytes" + note));
    box.querySelector("ul").appendChild(li);
  });
}
if (data.network.length) {
  const box = document.getElementById("network");
  box.hidden = false;
  text(box.querySelector("h1"), "Network: " + data.network.length + " requests");
  data.network.forEach((r) => {
    const row = document.createElement("tr");
    [r.status || r.error || "", r.method, String(Math.round(r.time)), r.url].forEach((v) =>
      row.appendChild(text(document.createElement("td"), v)));
    box.querySelector("tbody").appendChild(row);
  });
}
</script>
</body></html>
"""


#: Downloads embedded in the page, at most (the rest are listed by name), and
#: the video's chunks (past it, the page names where the rest are).
EMBEDDED_DOWNLOADS = 10 * 1024 * 1024
EMBEDDED_VIDEO = 64 * 1024 * 1024


def render(
    manifest: BrowserRecordingManifest,
    lines: Iterable[LogLine],
    images: Mapping[str, bytes],
    network: Iterable[Mapping[str, Any]] = (),
    files: Mapping[str, bytes] | None = None,
    video: Mapping[str, bytes] | None = None,
) -> str:
    """The page: ``images`` are the frames' bytes by file name; ``network``
    the entries of its ``network.har``; ``files`` its downloads' bytes by
    file name (``downloads/<name>``), embedded up to :data:`EMBEDDED_DOWNLOADS`."""
    lines = list(lines)
    items = frame_items(manifest, lines)
    logged = log_items(lines, items, manifest.video.entries_at if manifest.video else {})
    times = manifest.video.frames_at if manifest.video is not None else {}
    for item in items:
        item["video_at"] = times.get(str(item["index"]))
    chunks = []
    room = EMBEDDED_VIDEO
    for chunk in manifest.video.chunks if manifest.video is not None else []:
        clip = (video or {}).get(chunk.file)
        if clip is None or len(clip) > room:
            break  # the video plays up to here
        room -= len(clip)
        chunks.append(
            {
                "href": "data:video/mp4;base64," + base64.b64encode(clip).decode(),
                "offset_s": chunk.offset_s,
            }
        )
    left = EMBEDDED_DOWNLOADS
    downloads = []
    for download in manifest.downloads:
        found = (files or {}).get(download.file or "")
        href, note = None, download.why or ("" if download.file else "not kept")
        if found is not None and len(found) <= left:
            left -= len(found)
            href = "data:application/octet-stream;base64," + base64.b64encode(found).decode()
        elif found is not None:
            note = "too big to embed: see " + (download.file or "")
        downloads.append(
            {"name": download.name, "bytes": download.bytes, "href": href, "note": note}
        )
    requests = [
        {
            "status": (e.get("response") or {}).get("status") or 0,
            "error": e.get("_error") or "",
            "method": str((e.get("request") or {}).get("method") or ""),
            "time": float(e.get("time") or 0),
            "url": str((e.get("request") or {}).get("url") or ""),
        }
        for e in network
    ]
    inlined = {}
    for item in items:
        file = item["file"]
        if file is None or file not in images:
            item["file"] = None
            continue
        kind = "image/png" if file.endswith(".png") else "image/jpeg"
        inlined[file] = f"data:{kind};base64," + base64.b64encode(images[file]).decode()
    data = script_json(
        {
            "recording": manifest.recording_id,
            "items": items,
            "images": inlined,
            "downloads": downloads,
            "network": requests,
            "video": chunks,
            "log": logged,
            "log_more": len(logged) == LOG_SHOWN,
        }
    )
    title = html.escape(f"recording {manifest.name or manifest.recording_id}")
    # One pass: a title holding "__DATA__" stays a title.
    head, rest = _PAGE.split("__TITLE__", 1)
    middle, tail = rest.split("__DATA__", 1)
    return head + title + middle + data + tail


#: What JSON may hold that a script element's text may not: "</script>" ends
#: it, "<!--" followed by "<script" makes the parser read past its end (a
#: page's label once blanked the whole viewer), "&" and the line separators
#: are escaped for good measure. JSON reads each escape back as the character.
_UNSAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(value: object) -> str:
    """``value`` as JSON that is safe as the text of a ``<script>`` element:
    no ``<``, ``>`` or ``&`` in it at all."""
    return json.dumps(value).translate(_UNSAFE)


def view(recording: str, out: Path | None = None) -> Path:
    """Write the page for ``recording`` (a folder or an ``s3://`` URL); its path."""
    with tempfile.TemporaryDirectory() as tmp:
        s3 = recording.startswith("s3://")
        folder = download_recording(recording, Path(tmp)) if s3 else Path(recording)
        manifest_file = folder / "manifest.json"
        if not manifest_file.exists():
            raise FileNotFoundError(
                f"{recording} holds no manifest.json: give a recording's folder "
                "(a run's recordings/<recording_id>/) or its s3:// place"
            )
        manifest = BrowserRecordingManifest.model_validate_json(manifest_file.read_bytes())
        log = folder / "log.jsonl"
        lines = read_lines(log.read_bytes()) if log.exists() else []
        images = {}
        for frame in manifest.frames:
            name = safe_name(frame.file)
            if name is not None and not frame.error and (folder / name).is_file():
                images[frame.file] = (folder / name).read_bytes()
        network: list[dict[str, Any]] = []
        har = folder / "network.har"
        if manifest.har is not None and har.is_file():
            network = list(json.loads(har.read_bytes()).get("log", {}).get("entries", []))
        files = {}
        for download in manifest.downloads:
            name = safe_name(download.file) if download.file else None
            if name is not None and (folder / name).is_file():
                files[download.file or ""] = (folder / name).read_bytes()
        clips = {}
        for chunk in manifest.video.chunks if manifest.video is not None else []:
            name = safe_name(chunk.file)
            if name is not None and (folder / name).is_file():
                clips[chunk.file] = (folder / name).read_bytes()
        page = render(manifest, lines, images, network, files, clips)
        target = out or (
            Path(recording.rstrip("/").rsplit("/", 1)[-1] + ".html")
            if recording.startswith("s3://")
            else folder / "view.html"
        )
        target.write_text(page)
        return target
