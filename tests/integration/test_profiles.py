"""Named profiles in the built image (issue 45, item 2): a site that keeps its
session in IndexedDB (and a cookie, and local storage) is signed in on one
computer in Alice's scope; the harness's ``browser_save_profile`` (its own
client of the computer, a ``file`` store in a folder of the test) saves it
sealed; ``browser_load_profile`` loads it into Alice's fresh scope on a second
computer, and the same page there shows the same session. A second load into
that scope, now not fresh, is refused and changes nothing. Every byte the
computers wrote under /var/log/agentenv, their process output, the harness's
files and what this test printed hold neither the session token nor the
cookie's value, while the ops' entries are there. A load that fails part
way leaves the scope as it was. And two ``agentenv run``s with an S3 store:
one saves on the first computer, the next loads on the second.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from agentenv.harness.computer import Computer as HarnessComputer
from agentenv.harness.computer import ComputerError
from agentenv.harness.preflight import KEY_ENV
from agentenv.harness.profile_steps import load_profile, save_profile
from agentenv.harness.steps import BrowserLoadProfile, BrowserSaveProfile
from agentenv.harness.store import FolderStore
from agentenv.protocol.profiles import PROFILE_LIMIT
from tests.security.attacks import browser_url
from tests.support.container import Computer, computer
from tests.support.timing import deadline

SITE_PORT = 8201

#: The site: signing in makes a session token in the page (never in the
#: page's source or a URL), keeps it in IndexedDB only, sets a cookie of
#: another random value, and the page says who is signed in from IndexedDB.
APP = """<!doctype html><title>idb site</title>
<p id=who>checking</p><button id=signin>sign in</button>
<script>
const open = () => new Promise((ok, no) => {
  const r = indexedDB.open("auth", 3);
  r.onupgradeneeded = () => {
    const os = r.result.createObjectStore("session", {keyPath: "id"});
    os.createIndex("by_user", "user");
    r.result.createObjectStore("visits", {autoIncrement: true});
  };
  r.onsuccess = () => ok(r.result); r.onerror = () => no(r.error);
});
const done = (tx) => new Promise((ok, no) => { tx.oncomplete = ok; tx.onerror = no; });
window.session = async () => {
  const db = await open();
  const got = await new Promise((ok) => {
    const r = db.transaction("session").objectStore("session").get("me");
    r.onsuccess = () => ok(r.result || null);
  });
  db.close();
  return got;
};
window.signIn = async (user) => {
  const db = await open();
  const tx = db.transaction(["session", "visits"], "readwrite");
  tx.objectStore("session").put({id: "me", user, token: "tok-" + crypto.randomUUID()});
  tx.objectStore("visits").add({at: 1});
  await done(tx);
  db.close();
  document.cookie = "sid=ck-" + crypto.randomUUID() + "; path=/; max-age=3600";
  localStorage.setItem("last_user", user);
  sessionStorage.setItem("tab_token", "ss-" + crypto.randomUUID());
  sessionStorage.setItem("user:kk-" + crypto.randomUUID(), "1");  // a secret in a key
  await show();
};
const show = async () => {
  const s = await window.session();
  document.getElementById("who").textContent = s ? "signed in as " + s.user : "signed out";
};
document.getElementById("signin").onclick = () => window.signIn("alice@site.test");
show();
</script>"""


@pytest.fixture(scope="module")
def pair(image: str) -> Iterator[tuple[Computer, Computer]]:
    env = {"AGENTENV_MAX_SCOPES": "2"}
    with computer(image, env=env) as first, computer(image, env=env) as second:
        for pc in (first, second):
            pc.serve_folder(SITE_PORT, "/tmp/idbsite", {"app.html": APP, "blank.html": BLANK})
        yield first, second


def _harness_op(pc: Computer, scope: str) -> Any:
    """The runner's op call, through the harness's own client of ``pc``."""
    client = HarnessComputer(api=pc.app, cdp=pc.relay, token=pc.control)

    def op(step: Any, which: str, model: type, /, **fields: Any) -> Any:
        return client.op(which, model, scope=scope, **fields)

    return op


def _who(pc: Computer, user: str, url: str, sign_in: bool = False) -> tuple[str, Any, Any]:
    """What the page says, its IndexedDB session and its cookie, in ``user``'s browser."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_url(pc, user), timeout=deadline(30) * 1000)
        context = browser.contexts[0]
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(url)
        if sign_in:
            page.click("#signin")
        settled = "startsWith('signed in')" if sign_in else "startsWith('signed')"
        page.wait_for_function(
            f"document.getElementById('who').textContent.{settled}",
            timeout=deadline(15) * 1000,
        )
        said = page.inner_text("#who")
        session = page.evaluate("window.session()")
        cookie = next((c["value"] for c in context.cookies() if c["name"] == "sid"), None)
        browser.close()
    return said, session, cookie


def _tab_token(pc: Computer, user: str) -> tuple[str | None, str | None]:
    """The session storage the site keeps, in ``user``'s tab in front (at
    the site: the page it shows, or the site's blank page): the token's
    value, and the key that holds a secret."""
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_url(pc, user), timeout=deadline(30) * 1000)
        page = browser.contexts[0].pages[0]
        if not page.url.startswith(f"http://127.0.0.1:{SITE_PORT}/"):
            page.goto(f"http://127.0.0.1:{SITE_PORT}/blank.html")
        found = page.evaluate(
            "[sessionStorage.getItem('tab_token'),"
            " Object.keys(sessionStorage).find(k => k.startsWith('user:')) || null]"
        )
        browser.close()
    return found[0], found[1]


#: A page of the site that stores nothing (asking it leaves a scope fresh).
BLANK = "<!doctype html><title>blank</title>"
#: The permissions whose state the page is asked for.
ASKED = ("geolocation", "notifications", "camera")


def _permissions(pc: Computer, user: str, url: str, grant: bool = False) -> dict[str, str]:
    """A page's own view of its permissions in ``user``'s browser (the site's
    blank page, which stores nothing), after (with ``grant``) Playwright's
    grants and a clear between them."""
    origin = url.rsplit("/", 1)[0]
    with sync_playwright() as pw:
        browser = pw.chromium.connect_over_cdp(browser_url(pc, user), timeout=deadline(30) * 1000)
        context = browser.contexts[0]
        if grant:
            context.grant_permissions(["notifications", "camera"])
            context.clear_permissions()  # what came before is not kept
            context.grant_permissions(["geolocation"], origin=origin)
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(origin + "/blank.html")
        states = page.evaluate(
            "async (names) => Object.fromEntries(await Promise.all(names.map(async n =>"
            " [n, (await navigator.permissions.query({name: n})).state])))",
            list(ASKED),
        )
        browser.close()
    return dict(states)


def test_a_profile_saved_on_one_computer_signs_in_on_another(
    pair: tuple[Computer, Computer], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    first, second = pair
    url = f"http://127.0.0.1:{SITE_PORT}/app.html"
    before = [first.log()[1], second.log()[1]]
    said, session, cookie = _who(first, "alice", url, sign_in=True)
    assert said == "signed in as alice@site.test"
    token = session["token"]
    assert token.startswith("tok-") and cookie and cookie.startswith("ck-")
    tab_token, secret_key = _tab_token(first, "alice")
    assert tab_token and tab_token.startswith("ss-"), "the tab's session storage holds it"
    assert secret_key and secret_key.startswith("user:kk-"), "and a key holding a secret"
    granted = _permissions(first, "alice", url, grant=True)
    assert granted["geolocation"] == "granted" and granted["camera"] != "granted", granted

    environ = {KEY_ENV: base64.b64encode(os.urandom(32)).decode()}
    store = FolderStore(tmp_path)
    saving = BrowserSaveProfile(type="browser_save_profile", env_id="e", name="site-login")
    saved = save_profile(_harness_op(first, "alice"), store, saving, environ)
    assert saved["cookies"] >= 1 and saved["origins"] == 1 and saved["databases"] == 1, saved
    assert saved["permissions"] == 1, saved  # the grant after the clear
    assert saved["session_storage"] == 1, saved

    # The second computer's Alice: signed out before, the same session after.
    assert _who(second, "alice", url)[0] == "signed out"
    # Not fresh now (the check above opened the site, which made its database).
    loading = BrowserLoadProfile(type="browser_load_profile", env_id="e", name="site-login")
    with pytest.raises(ComputerError, match="fresh scope only") as refused:
        load_profile(_harness_op(second, "alice"), store, loading, environ)
    assert refused.value.status == 409
    assert _permissions(second, "bob", url)["geolocation"] == "prompt"
    loaded = load_profile(_harness_op(second, "bob"), store, loading, environ)
    assert loaded["databases"] == 1 and loaded["cookies"] >= 1, loaded
    assert loaded["permissions"] == 1 and loaded["session_storage"] == 1, loaded
    with sync_playwright() as pw:  # the tab in front shows what it showed, with no history
        bob = pw.chromium.connect_over_cdp(browser_url(second, "bob"), timeout=deadline(30) * 1000)
        front = bob.contexts[0].pages[0]
        shown = (front.url, front.evaluate("history.length"))
        assert shown == (f"http://127.0.0.1:{SITE_PORT}/blank.html", 1), shown
        bob.close()
    assert _permissions(second, "bob", url) == granted  # as the page saw them where saved
    said, again, same_cookie = _who(second, "bob", url)
    assert said == "signed in as alice@site.test"
    assert again == session and same_cookie == cookie
    assert _tab_token(second, "bob") == (tab_token, secret_key)  # the front tab's
    local = second.op("local_storage/get", {"scope": "bob", "origin": url.rsplit("/", 1)[0]})
    assert local["items"] == {"last_user": "alice@site.test"}
    visits = (
        "new Promise(ok => { const r = indexedDB.open('auth'); r.onsuccess = () => {"
        " const q = r.result.transaction('visits').objectStore('visits').getAll();"
        " q.onsuccess = () => ok(q.result); }; })"
    )
    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(second, "bob"), timeout=deadline(30) * 1000)
        page = bob.contexts[0].pages[0]
        assert page.evaluate(visits) == [{"at": 1}]  # an out-of-line key's store too
        bob.close()

    # Loading again into Bob's scope, not fresh now: refused, nothing changed.
    with pytest.raises(ComputerError, match="holds") as again_refused:
        load_profile(_harness_op(second, "bob"), store, loading, environ)
    assert again_refused.value.status == 409

    for pc, after, op in (
        (first, before[0], "profiles/save"),
        (second, before[1], "profiles/load"),
    ):
        entries = [x["action"] for x in pc.settled_log(after) if "action" in x]
        mine = [a for a in entries if a.get("op") == op and a.get("ok")]
        assert mine and mine[0].get("args", {}).get("name") == "site-login", mine[:1]
        assert set(mine[0]["args"]) == {"scope", "name"}, mine[0]

    # Every byte: both computers' log folders and output, the harness's files, this test's.
    harness_files = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert harness_files, "the sealed profile is in the store's folder"
    printed = capfd.readouterr()
    haystacks = {
        "first's log folder": first.all_log_bytes(),
        "second's log folder": second.all_log_bytes(),
        "first's output": first.container.get_wrapped_container().logs(),
        "second's output": second.container.get_wrapped_container().logs(),
        "the harness's files": harness_files,
        "this test's output": (printed.out + printed.err).encode(),
    }
    for where, haystack in haystacks.items():
        for secret in (token, cookie, tab_token, secret_key.split(":", 1)[1]):
            assert secret.encode() not in haystack, f"{secret[:4]}… found in {where}"


def test_a_load_that_fails_part_way_leaves_the_scope_as_it_was(
    pair: tuple[Computer, Computer],
) -> None:
    """Bob's scope on the first computer, fresh: a profile whose IndexedDB
    record cannot be written (no key at the store's key path) after its cookie
    and local storage were, fails whole, and a save then finds nothing; so
    does one granting a permission no agent may grant. A
    record JSON cannot carry (a Date) fails a save, naming its store."""
    first, _ = pair
    at = f"http://127.0.0.1:{SITE_PORT}"
    bad = {
        "cookies": [{"name": "half", "value": "half-3c1d", "domain": "127.0.0.1", "path": "/"}],
        "origins": {
            at: {
                "local_storage": {"half": "yes"},
                "indexeddb": [
                    {
                        "name": "broken",
                        "version": 1,
                        "stores": [
                            {"name": "s", "key_path": "id", "records": [{"key": 1, "value": {}}]}
                        ],
                    }
                ],
            }
        },
    }
    said = first.op("profiles/load", {"scope": "bob", "name": "bad", "profile": bad}, status=502)
    assert "restored nothing" in said["error"]["message"], said
    assert first.op("cookies/get", {"scope": "bob"})["cookies"] == []
    assert first.op("local_storage/get", {"scope": "bob", "origin": at})["items"] == {}
    # A permission an agent could not grant (the local network), after one it
    # could and the cookie: the relay refuses it, and the load undoes it all.
    overreach = {
        "cookies": bad["cookies"],
        "permissions": [
            {"method": "Browser.grantPermissions", "params": {"permissions": ["geolocation"]}},
            {"method": "Browser.grantPermissions", "params": {"permissions": ["localNetwork"]}},
        ],
    }
    said = first.op(
        "profiles/load", {"scope": "bob", "name": "over", "profile": overreach}, status=403
    )
    assert "restored nothing" in said["error"]["message"], said
    assert first.op("cookies/get", {"scope": "bob"})["cookies"] == []
    # A tab in front holding session storage of the profile's origin: a load
    # overwrites nothing (409), and what it wrote before is undone.
    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(first, "bob"), timeout=deadline(30) * 1000)
        front = bob.contexts[0].pages[0]
        front.goto(f"{at}/blank.html")
        front.evaluate("sessionStorage.setItem('mine', 'kept')")
        bob.close()
    clash = {"cookies": bad["cookies"], "session_storage": {at: {"theirs": "no"}}}
    said = first.op("profiles/load", {"scope": "bob", "name": "c", "profile": clash}, status=409)
    assert "already holds session storage" in said["error"]["message"], said
    assert first.op("cookies/get", {"scope": "bob"})["cookies"] == []
    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(first, "bob"), timeout=deadline(30) * 1000)
        front = bob.contexts[0].pages[0]
        assert front.url == f"{at}/blank.html", front.url  # back where it was
        held = front.evaluate("JSON.stringify(Object.entries(sessionStorage))")
        assert held == '[["mine","kept"]]', held
        bob.close()
    empty = first.op("profiles/save", {"scope": "bob", "name": "empty"})
    assert (empty["cookies"], empty["origins"], empty["databases"]) == (0, 0, 0), empty
    assert empty["permissions"] == 0, empty  # nothing of the refused load's kept

    # Not a profile: another format, an origin that is not one.
    first.op("profiles/load", {"scope": "bob", "name": "x", "profile": {"format": 2}}, status=400)
    wrong: dict[str, Any] = {"origins": {"javascript:alert(1)": {}}}
    first.op("profiles/load", {"scope": "bob", "name": "x", "profile": wrong}, status=400)

    with sync_playwright() as pw:
        bob = pw.chromium.connect_over_cdp(browser_url(first, "bob"), timeout=deadline(30) * 1000)
        page = bob.contexts[0].pages[0]
        page.goto(f"{at}/app.html")
        page.wait_for_function("document.getElementById('who').textContent === 'signed out'")
        page.evaluate(
            "new Promise(ok => { const r = indexedDB.open('auth', 3); r.onsuccess = () => {"
            " const tx = r.result.transaction('visits', 'readwrite');"
            " tx.objectStore('visits').add({at: new Date()}); tx.oncomplete = ok; }; })"
        )
        bob.close()
    refused = first.op("profiles/save", {"scope": "bob", "name": "dated"}, status=422)
    assert "'auth/visits'" in refused["error"]["message"], refused


def test_a_profile_past_its_bound_is_refused_whole(pair: tuple[Computer, Computer]) -> None:
    """The 16 MiB bound in the built image: a site holding 18 MiB in
    IndexedDB cannot be saved (413 naming the bound, nothing answered), and
    a load's body past the bound is refused before it is read whole."""
    _, second = pair
    at = f"http://127.0.0.1:{SITE_PORT}"
    with sync_playwright() as pw:
        alice = pw.chromium.connect_over_cdp(
            browser_url(second, "alice"), timeout=deadline(30) * 1000
        )
        page = alice.contexts[0].pages[0]
        page.goto(f"{at}/blank.html")
        page.evaluate(
            "new Promise((ok, no) => { const r = indexedDB.open('big', 1);"
            " r.onupgradeneeded = () => r.result.createObjectStore('s');"
            " r.onsuccess = () => { const tx = r.result.transaction('s', 'readwrite');"
            " for (let n = 0; n < 3; n++) tx.objectStore('s').put('x'.repeat(6 << 20), n);"
            " tx.oncomplete = () => { r.result.close(); ok(); }; tx.onerror = no; }; })"
        )
        try:
            refused = second.op("profiles/save", {"scope": "alice", "name": "big"}, status=413)
            message = refused["error"]["message"]
            assert str(PROFILE_LIMIT) in message and "nothing was saved" in message, message
        finally:
            page.evaluate(
                "new Promise(ok => { const r = indexedDB.deleteDatabase('big');"
                " r.onsuccess = r.onerror = r.onblocked = ok; })"
            )
            alice.close()
    body = {"scope": "bob", "name": "big", "profile": {"cookies": [], "pad": "x" * (17 << 20)}}
    second.op("profiles/load", body, status=413)


def test_agentenv_run_saves_in_one_run_and_loads_in_the_next_through_s3(
    pair: tuple[Computer, Computer], store_image: str, tmp_path: Path
) -> None:
    """Two ``agentenv run``s, each attached to one computer, with ``--store
    s3://…`` (moto, the harness's own credentials): the first saves Alice's
    (home scope's) sign-in, the second, on the other computer after a
    ``data/reset``, loads it; the site there shows the session. The bucket
    holds only the sealed profile; the run folders and the runs' output hold
    neither the token nor the cookie."""
    import subprocess
    import sys
    import uuid

    import boto3
    import docker
    import yaml

    from tests.support.container import CONTROL, PLAIN_S3
    from tests.support.timing import wait_for

    first, second = pair
    url = f"http://127.0.0.1:{SITE_PORT}/app.html"
    _, session, cookie = _who(first, "alice", url, sign_in=True)
    second.op("data/reset", {})
    assert _who_fresh(second, url)
    secret = f"harness-secret-{uuid.uuid4().hex}"
    s3 = docker.from_env().containers.run(
        store_image, detach=True, init=True, ports={"5000/tcp": ("127.0.0.1", None)}, **PLAIN_S3
    )
    try:
        s3.reload()
        endpoint = f"http://127.0.0.1:{s3.ports['5000/tcp'][0]['HostPort']}"
        aws = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "AKIAHARNESSOWN",
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        bucket = boto3.session.Session(
            aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=secret,
            region_name="us-east-1",
        ).client("s3", endpoint_url=endpoint)
        wait_for(lambda: _lists(bucket), "the S3 server to answer", timeout_s=60)
        bucket.create_bucket(Bucket="team")
        environ = {**os.environ, **aws, KEY_ENV: base64.b64encode(os.urandom(32)).decode()}
        outputs = []
        for pc, step in ((first, "browser_save_profile"), (second, "browser_load_profile")):
            task = {
                "envs": {"e": {"versions": {1: {"browsers": ["main"]}}}},
                "steps": [
                    {
                        "type": "deploy_env",
                        "env_id": "e",
                        "url": pc.app,
                        "token": CONTROL,
                        "cdp_url": pc.relay,
                    },
                    {"id": "profile", "type": step, "env_id": "e", "name": "site-login"},
                ],
            }
            path = tmp_path / f"{step}.yaml"
            path.write_text(yaml.safe_dump(task))
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "agentenv",
                    "run",
                    str(path),
                    "--out",
                    str(tmp_path / step),
                    "--store",
                    "s3://team/profiles-test",
                ],
                capture_output=True,
                text=True,
                timeout=deadline(300),
                env=environ,
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            outputs.append(done.stdout + done.stderr)
        keys = [o["Key"] for o in bucket.list_objects_v2(Bucket="team").get("Contents", [])]
        assert keys == ["profiles-test/profiles/site-login.profile"], keys
        sealed = bucket.get_object(Bucket="team", Key=keys[0])["Body"].read()
    finally:
        s3.remove(force=True, v=True)
    said, again, same_cookie = _who(second, "alice", url)
    assert said == "signed in as alice@site.test" and again == session and same_cookie == cookie
    files = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for haystack in (files, sealed, "".join(outputs).encode()):
        for value in (session["token"], cookie):
            assert value.encode() not in haystack


def _who_fresh(pc: Computer, url: str) -> bool:
    """Alice's scope holds no cookie and no storage of the site (without visiting it)."""
    at = url.rsplit("/", 1)[0]
    saved = pc.op("profiles/save", {"scope": "alice", "name": "probe"})
    held = pc.op("local_storage/get", {"scope": "alice", "origin": at})["items"]
    return bool(saved["cookies"] == 0 and saved["databases"] == 0 and held == {})


def _lists(s3: Any) -> bool:
    try:
        s3.list_buckets()
    except Exception:
        return False
    return True
