"""The local store's server: moto's S3 with its checks on, serving one run.

The same code runs two ways:

- in the **store container** (``images/store/``, built by
  ``scripts/store-image.sh``), which is what ``agentenv run`` starts: the
  container runs this file as a script (``python3 storeserver.py --port 5000
  --keys FILE``) and the harness reads the administrator's keys from FILE
  through the engine's API (an exec of ``cat`` as the store's user: ``docker
  cp`` cannot see the tmpfs FILE is on), so they never reach a command line,
  an environment variable or a log; this program prints nothing of them;
- in a **thread** of a process on this machine (:func:`serve`), for the
  native tests and benches, which need no engine.

What it guarantees either way: every request is signed (AWS signature
version 4) and checked against IAM (moto's ``INITIAL_NO_AUTH_ACTION_COUNT``
is 0 once the administrator exists); moto's management API (``/moto-api``,
which could turn the checks off) is not served. The administrator is made
with the checks off on a second server bound to the loopback address and
gone before the real one listens.

Standalone on purpose: it imports only the standard library, moto, werkzeug
and boto3, because the store image carries no agentenv.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
from typing import Any

__all__ = ["ADMIN_KEYS", "guarded", "main", "make_admin", "serve"]

#: Where the container writes the administrator's keys (its own tmpfs).
ADMIN_KEYS = "/run/store/admin.json"
#: The port the container serves on (published on the harness's loopback).
PORT = 5000


def guarded() -> Any:
    """moto's WSGI app, refusing unsigned requests and the management API."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    backends = DomainDispatcherApplication(create_backend_app)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not served\n"]
        if not str(environ.get("HTTP_AUTHORIZATION", "")).startswith("AWS4-HMAC-SHA256 "):
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"sign the request (AWS signature version 4)\n"]
        return backends(environ, start_response)

    return app


def _server(host: str, port: int, app: Any) -> Any:
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, type: str, message: str, *args: Any) -> None:
            return

    return make_server(host, port, app, threaded=True, request_handler=Quiet)


_MADE: dict[str, str] = {}
_LOCK = threading.Lock()  # a batch's runs start stores from threads


def make_admin(app: Any) -> dict[str, str]:
    """An administrator of this process's moto (moto keeps its users for the
    whole process, across servers): made once, with the checks off, on a
    loopback-only server, before the checks go on for good."""
    with _LOCK:
        if _MADE:
            return dict(_MADE)
        import boto3
        from moto import settings

        setup = _server("127.0.0.1", 0, app)
        threading.Thread(target=setup.serve_forever, daemon=True).start()
        try:
            settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
            iam = boto3.session.Session(
                aws_access_key_id="setup",
                aws_secret_access_key=secrets.token_hex(16),
                region_name="us-east-1",
            ).client("iam", endpoint_url=f"http://127.0.0.1:{setup.server_port}")
            user = f"agentenv-harness-{secrets.token_hex(4)}"
            iam.create_user(UserName=user)
            keys = iam.create_access_key(UserName=user)["AccessKey"]
            iam.put_user_policy(
                UserName=user,
                PolicyName="all",
                PolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
                    }
                ),
            )
        finally:
            settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
            setup.shutdown()
            setup.server_close()
        _MADE.update(AccessKeyId=keys["AccessKeyId"], SecretAccessKey=keys["SecretAccessKey"])
        return dict(_MADE)


def serve(host: str, port: int = 0) -> tuple[Any, dict[str, str]]:
    """A guarded store on ``host:port`` (0: any free port), serving from a
    thread: (the werkzeug server, the administrator's keys). The caller
    shuts the server down."""
    app = guarded()
    keys = make_admin(app)
    server = _server(host, port, app)
    threading.Thread(target=server.serve_forever, name="agentenv-store", daemon=True).start()
    return server, keys


def main(argv: list[str] | None = None) -> int:
    """The container's program: serve on every address of the container."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--keys", default=ADMIN_KEYS, help="where to write the admin's keys")
    args = parser.parse_args(argv)
    app = guarded()
    keys = make_admin(app)
    server = _server("0.0.0.0", args.port, app)
    # Written once the server is bound: the keys' presence says "serving".
    os.makedirs(os.path.dirname(args.keys), exist_ok=True)
    part = args.keys + ".part"
    descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(keys, file)
    os.replace(part, args.keys)
    print(f"store: serving on port {args.port}", file=sys.stderr, flush=True)
    server.serve_forever()  # until the container stops (SIGTERM ends the process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
