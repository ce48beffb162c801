"""A port-forward to a pod through the API server: one listener on
127.0.0.1 per port, each accepted connection carried over a stream of the
client's (``portforward``). :mod:`.kubernetes` opens them."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any, Protocol

from agentenv.harness.k8s_status import refusal, short

__all__ = ["ACCEPT_POLL_S", "Forward", "ForwardStream", "pod_stream"]


class ForwardStream(Protocol):
    """What :class:`Forward` carries a connection to: a socket, or the
    client's port-forward socket."""

    def recv(self, size: int, /) -> bytes: ...
    def sendall(self, data: bytes, /) -> None: ...
    def shutdown(self, how: int, /) -> None: ...
    def close(self) -> None: ...


#: How often the accepting thread looks whether the forward was closed.
ACCEPT_POLL_S = 0.25


def _carry(
    source: ForwardStream, sink: ForwardStream, ends: tuple[ForwardStream, ForwardStream]
) -> None:
    """Bytes from ``source`` to ``sink`` until either side ends; then both
    end (no half-close: HTTP and WebSocket clients do not use it)."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


class Forward:
    """A listener on 127.0.0.1 (a port of its own) whose every connection is
    carried to a new stream from ``open_stream()``: for a computer out of the
    cluster, a port-forward to its pod. :meth:`close` stops it and its
    connections. ``error`` keeps why the last stream could not be opened.

    Each connection has a thread of its own: a stream that never opens (the
    client's WebSocket connect takes no timeout) holds only that connection,
    which the caller's own timeout gives up on."""

    def __init__(self, open_stream: Callable[[], ForwardStream], name: str = "forward") -> None:
        self._open_stream = open_stream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(ACCEPT_POLL_S)
        self.port: int = self._listener.getsockname()[1]
        self.error: str | None = None
        self._lock = threading.Lock()
        self._live: set[ForwardStream] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=name, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                local, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            local.setblocking(True)
            with self._lock:
                if self._closed.is_set():
                    local.close()
                    return
                self._live.add(local)
            threading.Thread(target=self._serve, args=(local,), daemon=True).start()

    def _serve(self, local: socket.socket) -> None:
        remote: ForwardStream | None = None
        try:
            try:
                remote = self._open_stream()
            except Exception as exc:  # the client's: refused, unreachable, pod gone
                self.error = short(exc)
                return
            with self._lock:
                if self._closed.is_set():
                    return
                self._live.add(remote)
            back = threading.Thread(
                target=_carry, args=(remote, local, (local, remote)), daemon=True
            )
            back.start()
            _carry(local, remote, (local, remote))
            back.join(5.0)  # _carry ended both: the other direction ends at once
        finally:
            for end in (local, remote):
                if end is not None:
                    with self._lock:
                        self._live.discard(end)
                    with contextlib.suppress(OSError):
                        end.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            live = list(self._live)
        for end in live:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
        self._thread.join(2 * ACCEPT_POLL_S + 1.0)


def pod_stream(
    configuration: Any, name: str, namespace: str, port: int
) -> Callable[[], ForwardStream]:
    """A new port-forward to ``port`` of the pod, one per connection."""

    def open_stream() -> ForwardStream:
        from kubernetes import client
        from kubernetes.stream import portforward

        # An ApiClient of its own: portforward() swaps the client's request
        # method while it connects, which would race with any other call.
        api = client.ApiClient(configuration)
        try:
            forwarded = portforward(
                client.CoreV1Api(api).connect_get_namespaced_pod_portforward,
                name,
                namespace,
                ports=str(port),
            )
        except client.ApiException as exc:
            raise refusal(exc, f"a port-forward to {name}:{port}") from None
        finally:
            api.close()
        stream: ForwardStream = forwarded.socket(port)
        return stream

    return open_stream
