"""The one root of every error agentenv raises on purpose, and the refusal
every server answers with.

::

    AgentEnvError
    ├── Refusal                 an HTTP answer: ``status`` and ``message`` (what to do next)
    │   ├── AccessDenied        the caller may not use this door (access.py): 401/403/400
    │   ├── BodyError           a request body that cannot be taken (http.py): 400/413
    │   ├── RelayError          the relay's (relay/relay_errors.py)
    │   │   ├── UpstreamError   Chromium did not answer or refused: 502/503/404
    │   │   ├── WatcherError    the relay's own connection to Chromium is down
    │   │   └── ControlRefused  an AgentEnv.* command refused: a -32602 answer
    │   ├── OpError             an op refused or failed (app/app_errors.py)
    │   │   └── KeyError_       a key combination that names no key: 400
    │   ├── Refused             a recorder op refused (recorder/recorder_errors.py)
    │   ├── GrantError          a recording's grant that cannot be used: 400
    │   └── UploadError         an upload failed (names the destination, never a credential): 502
    ├── AppError                the app server's (app/app_errors.py)
    │   └── ToolCallError       a malformed AgentEnv-Tool-Call or AgentEnv-Role header
    ├── RecorderError           the recorder's (recorder/recorder_errors.py): the three above
    ├── BrowserError            the browser link could not reach the browser (relay_link.py)
    │   └── CdpError            Chromium (or the relay's guard) refused a command
    ├── LogError                the action log's (log/log_errors.py)
    │   └── LogLocked           another writer holds the file's lock
    ├── SettingsError           a malformed setting, naming the variable (settings.py)
    ├── ArchiveError            a data/add archive that is not one (protocol/data.py)
    ├── MissingOp               a card without an op the caller needs (protocol/card.py)
    ├── KeyTextError            a key's text that is no Ed25519 key (protocol/attestation.py)
    ├── SigningKeyError         the computer's key cannot be made or read (signing.py)
    ├── LoopbackError           the harness's loopback door could not open (harness/loopback.py)
    ├── BrowserGymError         a BrowserGym env that cannot run as asked (browsergym.py)
    └── HarnessError            the harness's (harness/harness_errors.py): TaskError, ComputerError,
                                StepFailed, StoreError

Each class is defined beside the code that raises it; this module holds the
root and the refusal, which the servers' one error middleware
(:func:`agentenv.http.error_middleware`) turns into ``{"error": {"code",
"message"}}``.
"""

from __future__ import annotations

__all__ = ["AgentEnvError", "Refusal"]


class AgentEnvError(Exception):
    """The root of every error agentenv raises on purpose."""


class Refusal(AgentEnvError):
    """What a server answers: an HTTP ``status`` and a ``message`` that says
    what to do next (never a secret, never the caller's own text). A class
    names its usual status; a raise may give another."""

    status: int = 500
    #: Headers of the answer besides the body's (``Retry-After`` on a 429).
    headers: dict[str, str] | None = None

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
