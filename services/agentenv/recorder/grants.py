"""Uploads under a grant: a folder (``file:///…``) or any S3-compatible store.

An :class:`Uploader` writes ``<prefix>/<recording_id>/<name>``. S3 goes
through boto3 (the maintained client, imported on first use), with the
grant's endpoint, region and credentials; errors name the destination
without credentials.

Grants are checked on the computer (docs/spec.md section 4):

- a ``file:`` grant must be inside a folder the computer was told to allow
  (``AGENTENV_UPLOAD_ROOTS``; none by default in the image), after
  resolving ``..`` and links;
- an S3 ``endpoint_url`` must be http(s), and neither its name nor any
  address it resolves to may be link-local or a metadata service;
- a start proves its grant by writing ``start.json`` (the recording's id,
  start time and scope, and what the computer is: its image digest, Chromium
  and key) before it answers: a store that cannot be reached or refuses the
  credentials fails the start, not the end.

One boto3 session serves every grant (:func:`_session`): a session loads
S3's service model, several MiB of parsed JSON, so one made per grant (two a
recording: its start's, its end's) grew the recorder by about 10 MiB a
recording. Clients are made from it with each grant's own credentials, one
at a time on the event loop (a session is not thread-safe; its clients are),
and an ended recording closes its own (:meth:`Listed.close`).

A recording uploads through a :class:`Listed` uploader, which keeps the
SHA-256 of each file it put (the manifest's ``files``) and notes it in the
recording's journal (:mod:`agentenv.recorder.journal`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

import orjson

from agentenv.paths import inside
from agentenv.protocol.recording import Grant, public_enough
from agentenv.recorder.recorder_errors import GrantError, UploadError

__all__ = [
    "START_FILE",
    "FilesNoted",
    "GrantError",
    "Listed",
    "UploadError",
    "Uploader",
    "check_endpoint",
    "open_grant",
    "prove",
    "uploader",
]

#: The small object a start writes to prove its grant.
START_FILE = "start.json"

#: How long resolving an S3 endpoint's name may take.
ENDPOINT_LOOKUP_S = 5.0


class Uploader(Protocol):
    where: str

    async def put(self, name: str, data: bytes, content_type: str) -> None: ...

    async def list(self) -> list[str]: ...

    async def get(self, name: str) -> bytes: ...

    def close(self) -> None: ...


_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


def _client(**kwargs: Any) -> Any:
    """An S3 client from the recorder's one boto3 session (made on first
    use; its service models loaded once), one at a time."""
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            import boto3

            _SESSION = boto3.session.Session()
        return _SESSION.client("s3", **kwargs)


class FilesNoted(Protocol):
    """Where each file uploaded is noted (the recording's
    :class:`~agentenv.recorder.journal.Journal`)."""

    def file(self, name: str, sha256: str, size: int, content_type: str) -> None: ...


class Listed:
    """An uploader that keeps the hex SHA-256 of every file it put, by name
    (``files``, shared by the uploaders of one recording's grants): the
    bytes the computer sent, whatever the store holds later. Each is noted
    in the recording's ``journal`` too, once its upload succeeded."""

    def __init__(
        self,
        inner: Uploader,
        files: dict[str, str] | None = None,
        journal: FilesNoted | None = None,
    ) -> None:
        self.inner = inner
        self.where = inner.where
        self.files: dict[str, str] = {} if files is None else files
        self.journal = journal

    async def put(self, name: str, data: bytes, content_type: str) -> None:
        await self.inner.put(name, data, content_type)
        digest = self.files[name] = hashlib.sha256(data).hexdigest()
        if self.journal is not None:
            self.journal.file(name, digest, len(data), content_type)

    async def list(self) -> list[str]:
        return await self.inner.list()

    async def get(self, name: str) -> bytes:
        return await self.inner.get(name)

    def close(self) -> None:
        """Let go of the store's client (its connections); put fails after."""
        self.inner.close()


class FolderUploader:
    def __init__(self, folder: Path, where: str) -> None:
        self.folder = folder
        self.where = where

    def _put(self, name: str, data: bytes) -> None:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".part")
        partial.write_bytes(data)
        os.replace(partial, path)

    async def put(self, name: str, data: bytes, content_type: str) -> None:
        try:
            await asyncio.to_thread(self._put, name, data)
        except OSError as exc:
            raise UploadError(f"cannot write {name} under {self.where}: {exc.strerror}") from None

    async def list(self) -> list[str]:
        def walk() -> list[str]:
            if not self.folder.is_dir():
                return []
            return sorted(
                str(p.relative_to(self.folder))
                for p in self.folder.rglob("*")
                if p.is_file() and not p.name.endswith(".part")
            )

        return await asyncio.to_thread(walk)

    async def get(self, name: str) -> bytes:
        return await asyncio.to_thread((self.folder / name).read_bytes)

    def close(self) -> None:
        pass


async def check_endpoint(grant: Grant) -> None:
    """Refuse an S3 endpoint whose name resolves to a link-local or metadata address."""
    host = urlsplit(grant.endpoint_url).hostname if grant.endpoint_url else None
    if not host:
        return
    try:
        found = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(host, None), ENDPOINT_LOOKUP_S
        )
    except (OSError, TimeoutError):
        raise GrantError(
            f"the store's endpoint {host!r} does not resolve from this computer: check the "
            "grant's endpoint_url, or give the computer a route to it (the harness's local "
            "store: a network the computer joins)"
        ) from None
    for *_rest, address in found:
        if not public_enough(str(address[0])):
            raise GrantError(
                f"the store's endpoint {host!r} resolves to a link-local or metadata "
                "address: give the store's own address"
            )


#: botocore's errors for a store this computer has no route to.
UNREACHABLE = frozenset(
    {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError"}
)


class S3Uploader:
    def __init__(self, grant: Grant, prefix: str) -> None:
        from botocore.config import Config

        parts = urlsplit(grant.url)
        self.bucket = parts.netloc
        self.prefix = prefix
        self.where = f"s3://{self.bucket}/{prefix}"
        self.endpoint = grant.endpoint_url
        self.client: Any = _client(
            endpoint_url=grant.endpoint_url,
            region_name=grant.region or "us-east-1",
            aws_access_key_id=grant.access_key_id,
            aws_secret_access_key=grant.secret_access_key,
            aws_session_token=grant.session_token,
            config=Config(
                retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=30
            ),
        )

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    async def put(self, name: str, data: bytes, content_type: str) -> None:
        try:
            await asyncio.to_thread(
                self.client.put_object,
                Bucket=self.bucket,
                Key=self._key(name),
                Body=data,
                ContentType=content_type,
            )
        except Exception as exc:  # botocore's errors: name the place, not the keys
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            if code in UNREACHABLE:
                raise UploadError(
                    f"cannot upload {name} to {self.where}: this computer cannot reach the "
                    f"store at {self.endpoint or 'the default S3 endpoint'} ({code}); give it a "
                    "route to that address (the harness's local store: a network the computer "
                    "joins), or a store at an address it reaches"
                ) from None
            raise UploadError(
                f"cannot upload {name} to {self.where}: {code}; check the grant's bucket, "
                "region and credentials, or ask for a fresh grant"
            ) from None

    async def list(self) -> list[str]:
        def walk() -> list[str]:
            names: list[str] = []
            paginator = self.client.get_paginator("list_objects_v2")
            start = self._key("")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                names += [o["Key"][len(start) :] for o in page.get("Contents", [])]
            return sorted(names)

        try:
            return await asyncio.to_thread(walk)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            raise UploadError(f"cannot list {self.where}: {code}") from None

    async def get(self, name: str) -> bytes:
        answer = await asyncio.to_thread(
            self.client.get_object, Bucket=self.bucket, Key=self._key(name)
        )
        body: bytes = await asyncio.to_thread(answer["Body"].read)
        return body

    def close(self) -> None:
        self.client.close()


def uploader(grant: Grant, recording_id: str, roots: Sequence[Path] = ()) -> Uploader:
    """An uploader for ``grant``, writing under ``<prefix>/<recording_id>/``;
    a ``file:`` grant only inside one of ``roots``."""
    if grant.expired():
        raise GrantError(f"the grant for {grant.where()} has expired: ask for a fresh one")
    parts = urlsplit(grant.url)
    if parts.scheme == "file":
        base = unquote(parts.path)
        if not inside(base, *(str(r) for r in roots)):
            raise GrantError(
                f"{grant.where()} is not inside a folder this computer may write recordings "
                "to: use an s3:// grant, or start the computer with the folder in "
                "AGENTENV_UPLOAD_ROOTS"
            )
        folder = Path(base) / recording_id
        return FolderUploader(folder, f"file://{folder}")
    if not grant.access_key_id or not grant.secret_access_key:
        raise GrantError("an s3 grant needs access_key_id and secret_access_key")
    prefix = "/".join(p for p in (parts.path.strip("/"), recording_id) if p)
    return S3Uploader(grant, prefix)


async def open_grant(grant: Grant, recording_id: str, roots: Sequence[Path] = ()) -> Uploader:
    """:func:`uploader`, with an S3 endpoint's resolved addresses checked."""
    found = uploader(grant, recording_id, roots)
    if isinstance(found, S3Uploader):
        await check_endpoint(grant)
    return found


async def prove(
    upload: Uploader, recording_id: str, started_at: str, facts: dict[str, Any] | None = None
) -> None:
    """Write ``start.json`` (the recording, and ``facts``: its scope, what
    the computer is): the grant works (the store answers and takes the
    credentials), or the start fails here with the store's refusal."""
    body = orjson.dumps({"recording_id": recording_id, "started_at": started_at, **(facts or {})})
    await upload.put(START_FILE, body, "application/json")
