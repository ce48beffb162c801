"""Uploads under a grant: a folder (``file:///…``) or any S3-compatible store.

An :class:`Uploader` writes ``<prefix>/<recording_id>/<name>``. S3 goes
through boto3 (the maintained client), with the grant's endpoint, region and
credentials; errors name the destination without credentials.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from agentenv.protocol.recording import Grant

__all__ = ["GrantError", "UploadError", "Uploader", "uploader"]


class GrantError(ValueError):
    """A grant that cannot be used (malformed or expired)."""


class UploadError(Exception):
    """An upload failed; the message names the destination, never a credential."""


class Uploader(Protocol):
    where: str

    async def put(self, name: str, data: bytes, content_type: str) -> None: ...

    async def list(self) -> list[str]: ...

    async def get(self, name: str) -> bytes: ...


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


class S3Uploader:
    def __init__(self, grant: Grant, prefix: str) -> None:
        import boto3
        from botocore.config import Config

        parts = urlsplit(grant.url)
        self.bucket = parts.netloc
        self.prefix = prefix
        self.where = f"s3://{self.bucket}/{prefix}"
        self.client: Any = boto3.session.Session().client(
            "s3",
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


def uploader(grant: Grant, recording_id: str) -> Uploader:
    """An uploader for ``grant``, writing under ``<prefix>/<recording_id>/``."""
    if grant.expired():
        raise GrantError(f"the grant for {grant.where()} has expired: ask for a fresh one")
    parts = urlsplit(grant.url)
    if parts.scheme == "file":
        folder = Path(unquote(parts.path)) / recording_id
        return FolderUploader(folder, f"file://{folder}")
    if not grant.access_key_id or not grant.secret_access_key:
        raise GrantError("an s3 grant needs access_key_id and secret_access_key")
    prefix = "/".join(p for p in (parts.path.strip("/"), recording_id) if p)
    return S3Uploader(grant, prefix)
