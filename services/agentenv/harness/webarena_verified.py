"""WebArena-Verified's task output folder, from a recording (no I/O but the
reads and writes).

``webarena-verified eval-tasks --output-dir <out>`` (the ``webarena-verified``
package, 1.2.3) reads, for a task id ``N``::

    <out>/N/agent_response.json   the agent's final response
    <out>/N/network.har           the run's network trace, HAR 1.2
    <out>/N/run_config.json       the sites' URLs the run used (optional)

(its ``WebArenaVerifiedConfig``: ``agent_response_file_name``,
``trace_file_name``; ``__main__._resolve_config`` reads a task folder's
``run_config.json``). The response is its ``FinalAgentResponse``:
``{"task_type": "RETRIEVE"|"MUTATE"|"NAVIGATE", "status": "SUCCESS"|…,
"retrieved_data": [...]|null, "error_details": str|null}``
(``types/agent_response.py``); the trace is read by
``core/utils/network_event_utils.load_har_trace``, which needs ``log.entries``
and at least one entry. Its network evaluator matches the entries' request
URL, method, headers (``Accept``/``Sec-Fetch-*`` tell a navigation), query,
``postData`` and the response's status (``types/tracing.NetworkEvent``).

Secrets out: the recorder's ``network.har`` has its secrets withheld already
(:mod:`agentenv.recorder.har`); the export checks the bytes it writes once
more, by the log's rules (:mod:`agentenv.log.redact`): a header whose name
or value is a credential's and every cookie's value withheld, and every
string, the trace's, the response's and the sites' URLs, through
``redact_text`` (credentials in URLs and ``key=value`` pairs), so no secret
reaches the export even from a recording written by an older recorder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentenv.harness.harness_errors import HarnessError
from agentenv.log.redact import REDACTED, redact_text
from agentenv.log.secret_names import secret_header, secret_header_value

__all__ = [
    "SITES",
    "ExportError",
    "FinalAgentResponse",
    "export",
    "parse_response",
    "response_from_answer",
    "run_config",
    "trace",
]

#: WebArena-Verified's sites (its ``WebArenaSite``), as ``run_config.json``
#: names them: ``__SHOPPING__`` and so on.
SITES = ("gitlab", "map", "reddit", "shopping_admin", "shopping", "wikipedia", "homepage")


class ExportError(HarnessError):
    """What the export cannot write, and what to do about it."""


class FinalAgentResponse(BaseModel):
    """WebArena-Verified's ``FinalAgentResponse`` (``types/agent_response.py``)."""

    model_config = ConfigDict(extra="forbid")

    task_type: Literal["RETRIEVE", "MUTATE", "NAVIGATE"]
    status: Literal[
        "SUCCESS",
        "ACTION_NOT_ALLOWED_ERROR",
        "PERMISSION_DENIED_ERROR",
        "NOT_FOUND_ERROR",
        "DATA_VALIDATION_ERROR",
        "UNKNOWN_ERROR",
    ]
    retrieved_data: list[str | int | float | bool | dict[str, Any] | None] | None = None
    error_details: str | None = None


def response_from_answer(answer: str | None) -> FinalAgentResponse:
    """The agent's answer (what it wrote to ``AGENTENV_ANSWER_FILE``) read as
    WebArena-Verified's response: a JSON object in its schema, its
    ``task_type`` and ``status`` in any case (as the package reads them)."""
    if not answer:
        raise ExportError(
            "the agent gave no answer: write WebArena-Verified's JSON response to "
            "AGENTENV_ANSWER_FILE, or give the step a response"
        )
    try:
        found = json.loads(answer)
    except json.JSONDecodeError:
        raise ExportError(
            "the agent's answer is not JSON: WebArena-Verified reads "
            '{"task_type": ..., "status": ..., "retrieved_data": ...}'
        ) from None
    return parse_response(found)


def parse_response(found: object) -> FinalAgentResponse:
    """A response object checked against the schema (case as the package takes it)."""
    if not isinstance(found, dict):
        raise ExportError("WebArena-Verified's response is a JSON object")
    found = dict(found)
    if "performed_operation" in found and "task_type" not in found:
        found["task_type"] = found.pop("performed_operation")
    for key in ("task_type", "status"):
        if isinstance(found.get(key), str):
            found[key] = found[key].upper()
    try:
        return FinalAgentResponse.model_validate(found)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "response"
        raise ExportError(f"the response's {where}: {first['msg'].lower()}") from None


def _clean(value: Any) -> Any:
    """``value`` with every string in it (keys too) through the log's redaction."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _entry(found: Any) -> Any:
    """One HAR entry with its headers' and cookies' secrets withheld."""
    if not isinstance(found, dict):
        return found
    for side in ("request", "response"):
        message = found.get(side)
        if not isinstance(message, dict):
            continue
        headers = message.get("headers")
        if isinstance(headers, list):
            for header in headers:
                if isinstance(header, dict) and (
                    secret_header(str(header.get("name", "")))
                    or secret_header_value(str(header.get("value", "")))
                ):
                    header["value"] = REDACTED
        cookies = message.get("cookies")
        if isinstance(cookies, list):
            for cookie in cookies:
                if isinstance(cookie, dict) and "value" in cookie:
                    cookie["value"] = REDACTED
    return found


def trace(har: bytes) -> dict[str, Any]:
    """The recording's ``network.har`` as the export writes it: HAR 1.2 with
    at least one entry (the package refuses an empty one), secrets out."""
    try:
        document = json.loads(har)
    except ValueError:
        raise ExportError("the recording's network.har is not JSON") from None
    entries = document.get("log", {}).get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ExportError("the recording's network.har has no log.entries")
    if not entries:
        raise ExportError(
            "the recording's network.har has no request in it: the agent loaded nothing "
            "while it was recorded"
        )
    document["log"]["entries"] = [_entry(e) for e in entries]
    cleaned: dict[str, Any] = _clean(document)
    return cleaned


def run_config(sites: dict[str, str]) -> dict[str, Any]:
    """``run_config.json``: each site's URL as the run reached it, so the
    evaluator maps the trace's URLs to ``__SITE__`` (no credentials)."""
    environments = {}
    for site, url in sites.items():
        if site not in SITES:
            raise ExportError(f"unknown WebArena site {site!r}; known: {', '.join(SITES)}")
        environments[f"__{site.upper()}__"] = {"urls": [redact_text(url).rstrip("/")]}
    return {"environments": environments}


def export(
    har: bytes,
    out: Path,
    task_id: int,
    response: FinalAgentResponse,
    sites: dict[str, str] | None = None,
) -> Path:
    """Write ``<out>/<task_id>/`` as ``webarena-verified eval-tasks`` reads
    it; returns that folder. ``har`` is the recording's ``network.har``."""
    written = trace(har)
    config = run_config(sites) if sites else None
    body = _clean(response.model_dump(mode="json"))
    target = out / str(task_id)
    target.mkdir(parents=True, exist_ok=True)
    (target / "agent_response.json").write_text(json.dumps(body, indent=2))
    (target / "network.har").write_text(json.dumps(written))
    if config is not None:
        (target / "run_config.json").write_text(json.dumps(config, indent=2))
    return target
