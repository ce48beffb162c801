"""WebArena-Verified's task folder (agentenv.harness.webarena_verified), with
no browser: the files ``webarena-verified eval-tasks`` reads, the response's
schema, and no secret in any byte written. The real evaluator scoring a real
run is tests/integration/test_webarena_verified.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.harness.webarena_verified import (
    ExportError,
    export,
    parse_response,
    response_from_answer,
    run_config,
)

SITE = "http://shop.test:7770"
#: Secrets as an older (or broken) recorder could have left them in a HAR.
SECRETS = ("hdr-s3cr3t-17", "url-s3cr3t-23", "cookie-s3cr3t-31", "bearer-s3cr3t-44")


def _entry(url: str, headers: list[dict[str, str]], **more: Any) -> dict[str, Any]:
    return {
        "startedDateTime": "2026-12-05T22:00:00.000Z",
        "time": 1.0,
        "request": {
            "method": "GET",
            "url": url,
            "httpVersion": "http/1.1",
            "cookies": more.get("cookies", []),
            "headers": headers,
            "queryString": [],
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "http/1.1",
            "cookies": [],
            "headers": [{"name": "Content-Type", "value": "text/html"}],
            "content": {"size": 10, "mimeType": "text/html"},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": 10,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 1, "receive": 0},
    }


def _har() -> bytes:
    navigate = [
        {"name": "Accept", "value": "text/html,application/xhtml+xml"},
        {"name": "Sec-Fetch-Mode", "value": "navigate"},
    ]
    entries = [
        _entry(f"{SITE}/index.html?access_token={SECRETS[1]}", navigate),
        _entry(
            f"{SITE}/api.json",
            [
                {"name": "X-Api-Key", "value": SECRETS[0]},
                {"name": "X-Whatever", "value": f"Bearer {SECRETS[3]}"},
                {"name": "Cookie", "value": f"session={SECRETS[2]}"},
            ],
            cookies=[{"name": "session", "value": SECRETS[2]}],
        ),
        _entry(f"{SITE}/catalogsearch/result/?q=xbox", navigate),
    ]
    return json.dumps({"log": {"version": "1.2", "creator": {}, "entries": entries}}).encode()


def test_the_folder_holds_what_eval_tasks_reads_and_no_secret(tmp_path: Path) -> None:
    response = response_from_answer('{"task_type": "navigate", "status": "success"}')
    folder = export(_har(), tmp_path, 275, response, {"shopping": SITE + "/"})
    assert folder == tmp_path / "275"
    assert sorted(p.name for p in folder.iterdir()) == [
        "agent_response.json",
        "network.har",
        "run_config.json",
    ]
    assert json.loads((folder / "agent_response.json").read_text()) == {
        "task_type": "NAVIGATE",
        "status": "SUCCESS",
        "retrieved_data": None,
        "error_details": None,
    }
    assert json.loads((folder / "run_config.json").read_text()) == {
        "environments": {"__SHOPPING__": {"urls": [SITE]}}
    }
    entries = json.loads((folder / "network.har").read_text())["log"]["entries"]
    # Every entry is there, in order, with what the evaluator matches on.
    urls = [e["request"]["url"] for e in entries]
    assert urls[0].startswith(f"{SITE}/index.html?access_token=")
    assert urls[1:] == [f"{SITE}/api.json", f"{SITE}/catalogsearch/result/?q=xbox"]
    assert entries[2]["request"]["headers"][0] == {
        "name": "Accept",
        "value": "text/html,application/xhtml+xml",
    }
    assert entries[2]["response"]["status"] == 200
    sent = {h["name"]: h["value"] for h in entries[1]["request"]["headers"]}
    assert sent == {"X-Api-Key": "REDACTED", "X-Whatever": "REDACTED", "Cookie": "REDACTED"}
    assert entries[1]["request"]["cookies"] == [{"name": "session", "value": "REDACTED"}]
    for path in tmp_path.rglob("*"):
        data = path.read_bytes() if path.is_file() else b""
        for secret in SECRETS:
            assert secret.encode() not in data, (secret, path)


def test_an_answer_with_a_secret_is_written_without_it(tmp_path: Path) -> None:
    answer = {
        "task_type": "RETRIEVE",
        "status": "SUCCESS",
        "retrieved_data": [f"http://u:{SECRETS[1]}@shop.test/", 3],
    }
    folder = export(_har(), tmp_path, 1, parse_response(answer))
    written = (folder / "agent_response.json").read_text()
    assert SECRETS[1] not in written and json.loads(written)["retrieved_data"][1] == 3
    assert not (folder / "run_config.json").exists()


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (None, "no answer"),
        ("found it", "not JSON"),
        ("[1]", "a JSON object"),
        ('{"task_type": "browse", "status": "SUCCESS"}', "task_type"),
        ('{"task_type": "NAVIGATE"}', "status"),
        ('{"task_type": "NAVIGATE", "status": "SUCCESS", "extra": 1}', "extra"),
    ],
)
def test_a_response_outside_the_schema_fails_the_export(answer: str | None, says: str) -> None:
    with pytest.raises(ExportError, match=says):
        response_from_answer(answer)


def test_the_legacy_field_name_is_read() -> None:
    found = parse_response({"performed_operation": "mutate", "status": "success"})
    assert found.task_type == "MUTATE" and found.status == "SUCCESS"


@pytest.mark.parametrize(
    ("har", "says"),
    [
        (b"not json", "not JSON"),
        (b'{"log": {}}', "no log.entries"),
        (b'{"log": {"entries": []}}', "no request"),
    ],
)
def test_a_trace_the_evaluator_cannot_read_fails_the_export(
    tmp_path: Path, har: bytes, says: str
) -> None:
    response = parse_response({"task_type": "NAVIGATE", "status": "SUCCESS"})
    with pytest.raises(ExportError, match=says):
        export(har, tmp_path, 2, response)
    assert not (tmp_path / "2").exists()


def test_an_unknown_site_is_refused() -> None:
    with pytest.raises(ExportError, match="unknown WebArena site 'shop'"):
        run_config({"shop": SITE})
    assert (
        run_config({"gitlab": "http://u:p@git.test"})["environments"]["__GITLAB__"]["urls"][
            0
        ].count("p@")
        == 0
    )
