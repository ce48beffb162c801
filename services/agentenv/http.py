"""What the three servers (relay, app, recorder) answer over HTTP when they
refuse: one error body, ``{"error": {"code", "message"}}``, and bounded reads
of request bodies.

The message says what to do next; it never echoes a secret or the caller's
own text (a ``Host`` header, a token).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from aiohttp import web

from agentenv.access import AccessDenied, bearer_token
from agentenv.errors import Refusal
from agentenv.log.auth import Door, Failure, claimed
from agentenv.protocol.error_body import ErrorBody, ErrorDetail
from agentenv.settings import Settings

__all__ = [
    "BODY_LIMIT",
    "BodyError",
    "Handler",
    "asgi_error",
    "auth_middleware",
    "error_middleware",
    "error_response",
    "read_body",
    "read_json",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: The largest JSON body an op takes, at the app server and the recorder
#: (data/add's archive has a limit of its own).
BODY_LIMIT = 1024 * 1024


class BodyError(Refusal):
    """A request body that cannot be taken: ``status`` and what to send instead."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message, status)


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = ErrorBody(error=ErrorDetail(code=status, message=message))
    return web.json_response(body.model_dump(mode="json"), status=status, headers=headers)


def error_middleware(paths: Callable[[], str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The one error middleware of the three servers (the outermost): a
    :class:`~agentenv.errors.Refusal` raised anywhere inside is its error
    body; an unknown path names the ones ``paths()`` lists; a method the
    path does not take names those it does."""

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except Refusal as exc:
            return error_response(exc.status, exc.message, exc.headers)
        except web.HTTPNotFound:
            return error_response(404, f"no such path here; this server has {paths()}")
        except web.HTTPMethodNotAllowed as exc:
            allowed = ", ".join(sorted(exc.allowed_methods))
            answer = error_response(405, f"{request.method} is not allowed here; use {allowed}")
            answer.headers["Allow"] = allowed  # RFC 9110: a 405 names what the path takes
            return answer

    return errors


def auth_middleware(
    settings: Settings,
    door_of: Callable[[str], Door],
    report: Callable[[Failure], Awaitable[None]],
) -> Callable[..., Awaitable[web.StreamResponse]]:
    """The middleware that puts failed authentication on the record: a 401
    refusal raised inside it (no token, or one no user holds) is
    ``report``-ed as a :class:`~agentenv.log.auth.Failure` (the door
    ``door_of`` its path), then answered as before. Never the token."""

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except AccessDenied as exc:
            if exc.status == 401:
                sent = bearer_token(request.headers.get("Authorization")) or request.query.get(
                    "token"
                )
                known = [
                    *settings.users.values(),
                    settings.control_token or "",
                    settings.metrics_token or "",
                ]
                names = {
                    "user": request.query.get("user"),
                    "role": request.headers.get("AgentEnv-Role"),
                }
                await report(
                    Failure(
                        door=door_of(request.path),
                        source=request.remote,
                        path=request.path,
                        why="no token" if sent is None else "unknown token",
                        claimed=claimed(names, sent, known),
                    )
                )
            raise

    return record


async def asgi_error(
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
    status: int,
    message: str,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    """The same error body, answered by an ASGI app (the app server's /mcp)."""
    body = ErrorBody(error=ErrorDetail(code=status, message=message))
    start = [(b"content-type", b"application/json"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": orjson.dumps(body.model_dump(mode="json"))})


async def read_body(request: web.Request, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (read no further than that)."""
    if request.content_length is not None and request.content_length > limit:
        raise BodyError(413, _too_big(limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise BodyError(413, _too_big(limit))
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: web.Request, limit: int) -> dict[str, Any]:
    """A JSON object body (an empty body is ``{}``), at most ``limit`` bytes."""
    raw = await read_body(request, limit)
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BodyError(400, "the body is not JSON: send a JSON object") from None
    if not isinstance(body, dict):
        raise BodyError(400, "the body must be a JSON object")
    return body


def _too_big(limit: int) -> str:
    size = f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"
    return f"the body is over {size}, the most this op takes"
