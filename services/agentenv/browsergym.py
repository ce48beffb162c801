"""BrowserGym's environments on an agentenv computer, in a scope of their own.

    pip install 'agentenv[browsergym]'      # browsergym-core 0.14.3, Playwright 1.44

    from agentenv.browsergym import make
    from agentenv.harness.computer import deploy

    computer = deploy(None, "http://127.0.0.1:8080", control_token)  # AGENTENV_MAX_SCOPES > 0
    env = make("browsergym/miniwob.click-button", computer,
               upload={"url": "file:///runs/miniwob"},          # a recording per episode
               task_kwargs={"base_url": "http://127.0.0.1:8000/miniwob/"})
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step('click("13")')
    env.close()

:func:`make` is ``gym.make(env_id, **env_kwargs)`` wrapped in
:class:`AgentenvBrowserEnv`. BrowserGym's ``BrowserEnv.reset`` gets its
browsers (the env's and its chat window's) from ``chromium.launch`` on the
Playwright that ``browsergym.core._get_global_playwright`` hands out; for
the length of each reset the wrapper puts there (``_set_global_playwright``,
BrowserGym's own hook) the same Playwright with a ``chromium`` whose
``launch`` is ``connect_over_cdp`` to the computer's relay with the scope's
token (as an ``Authorization`` header, never in a URL). So every command of
the env, its observations (the DOM snapshot and AXTree through
``new_cdp_session``, the screenshot) as much as its actions, goes through
the relay, is ruled and logged under the scope's name, and BrowserGym's
task, reward and observation code run unchanged. Nothing of BrowserGym is
subclassed or patched beyond that hook (written against browsergym-core
0.14.3, the version the extra pins).

The scope is opened (``scopes/open``, the control token) at the first reset
and closed (``scopes/close``) at :meth:`AgentenvBrowserEnv.close`. An env
never closed (a script that ends without ``env.close()``, an env dropped)
still closes its scope when it is collected or the interpreter exits
(``weakref.finalize``): a scope left open would hold one of the computer's
``AGENTENV_MAX_SCOPES`` until the computer stops. Its recording is not
ended then (the close of the scope ends it, ``reason`` ``stopped``). With
``scope=False`` the env acts as the computer's agent ``agent`` instead (a
computer per env, started by ``deploy`` with that agent's token). With an
``upload`` grant each episode is a browser-recording/v1 recording of the
scope, started at the reset and ended at the next reset or the close; the
manifests are in ``env.recordings``.

What a remote browser cannot honour: the launch's own settings (its
arguments, ``headless``, ``executable_path`` ...). BrowserGym's own
(``--disable-features=OverlayScrollbars``, no ``--hide-scrollbars``) only
shape scrollbars in screenshots and are dropped; anything set through
``pw_chromium_kwargs`` but ``slow_mo`` and ``timeout`` is refused with
:class:`BrowserGymError` (the computer's Chromium is launched by the
computer). ``record_video_dir`` is Playwright's own screencast, not the
recording: use ``upload``.
"""

from __future__ import annotations

import contextlib
import secrets
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import browsergym.core
import gymnasium as gym
from playwright.sync_api import Browser, BrowserType, Playwright

from agentenv.errors import AgentEnvError
from agentenv.harness.computer import Computer, ComputerError
from agentenv.harness.scoped import ScopedComputer, close_for, open_for
from agentenv.protocol.answers import RecordingStarted
from agentenv.protocol.recording import BrowserRecordingManifest, End, Reason, Start

__all__ = [
    "BROWSERGYM_VERSION",
    "AgentenvBrowserEnv",
    "BrowserGymError",
    "connect_options",
    "make",
]

#: The browsergym-core this module is written against (its extra pins it).
BROWSERGYM_VERSION = "0.14.3"
#: How long a connection to the relay may take (ms).
CONNECT_TIMEOUT_MS = 60_000
#: What BrowserGym itself passes to ``chromium.launch`` (the env's browser
#: and its chat window's): launch settings a remote browser has already.
_LAUNCH_ONLY = frozenset({"headless", "args", "ignore_default_args"})
#: What ``connect_over_cdp`` takes as ``launch`` does.
_CONNECT_TOO = frozenset({"slow_mo", "timeout"})


class BrowserGymError(AgentEnvError):
    """A BrowserGym env cannot run on the computer as asked."""


def connect_options(launch: Mapping[str, Any]) -> dict[str, Any]:
    """``connect_over_cdp``'s options for a ``chromium.launch`` with
    ``launch``'s: ``slow_mo`` and ``timeout`` kept, BrowserGym's own launch
    settings dropped, anything else refused (it would not apply)."""
    unknown = sorted(set(launch) - _LAUNCH_ONLY - _CONNECT_TOO)
    if unknown:
        raise BrowserGymError(
            f"pw_chromium_kwargs {', '.join(unknown)} cannot apply to the computer's "
            "Chromium (the computer launches it): leave them out"
        )
    found = {k: v for k, v in launch.items() if k in _CONNECT_TOO and v is not None}
    found.setdefault("timeout", CONNECT_TIMEOUT_MS)
    return found


class _RelayChromium:
    """Playwright's ``chromium`` whose ``launch`` connects to the relay."""

    def __init__(self, chromium: BrowserType, endpoint: str, token: str | None) -> None:
        self._chromium = chromium
        self._endpoint = endpoint
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def launch(self, **launch: Any) -> Browser:
        return self._chromium.connect_over_cdp(
            self._endpoint, headers=self._headers, **connect_options(launch)
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chromium, name)


class _RelayPlaywright:
    """The process's Playwright, its ``chromium`` a :class:`_RelayChromium`."""

    def __init__(self, playwright: Playwright, chromium: _RelayChromium) -> None:
        self._playwright = playwright
        self.chromium = chromium

    def __getattr__(self, name: str) -> Any:
        return getattr(self._playwright, name)


@contextlib.contextmanager
def _on_relay(endpoint: str, token: str | None) -> Iterator[None]:
    """BrowserGym's browsers launched meanwhile are connections to the relay."""
    # Playwright's sync API runs one instance a thread: BrowserGym's own.
    playwright: Playwright = browsergym.core._get_global_playwright()
    relayed = _RelayPlaywright(playwright, _RelayChromium(playwright.chromium, endpoint, token))
    browsergym.core._set_global_playwright(relayed)
    try:
        yield
    finally:
        browsergym.core._set_global_playwright(playwright)


class AgentenvBrowserEnv(gym.Wrapper):  # type: ignore[misc]
    """A BrowserGym env whose browser is a scope of an agentenv computer
    (see the module). ``scope`` is the scope's name once the first reset
    opened it; ``recordings`` the manifests of the episodes recorded."""

    def __init__(
        self,
        env: Any,
        computer: Computer,
        *,
        scope: bool = True,
        agent: str = "agent",
        upload: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(env)
        self.computer = computer
        self.agent = agent
        self.upload = dict(upload) if upload is not None else None
        self.recordings: list[BrowserRecordingManifest] = []
        self._own_scope = scope
        self._scoped: ScopedComputer | None = None
        self._recording: str | None = None
        self._episodes = 0
        self._left_open: weakref.finalize[[ScopedComputer], AgentenvBrowserEnv] | None = None

    @property
    def scope(self) -> str | None:
        if self._scoped is not None:
            return self._scoped.scopes.get(self.agent)
        return None if self._own_scope else self.agent

    def _where(self) -> tuple[Computer, str | None]:
        """The computer as the env acts on it, and the agent's token."""
        if not self._own_scope:
            token = self.computer.agents.get(self.agent)
            if token is None:
                raise BrowserGymError(
                    f"this computer has no agent {self.agent!r} (deploy it with that "
                    "agent's token), or pass scope=True to open a scope for the env"
                )
            return self.computer, token
        if self._scoped is None:
            self._scoped = open_for(self.computer, [self.agent])
            # Never closed: closed when collected, or at the interpreter's exit.
            self._left_open = weakref.finalize(self, _close_quietly, self._scoped)
        return self._scoped, self._scoped.agents[self.agent]

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._end_recording("completed")
        where, token = self._where()
        self._episodes += 1
        if self.upload is not None:
            started: RecordingStarted = where.recording(
                "start",
                Start,
                request_id=secrets.token_hex(12),
                upload=self.upload,
                name=f"{self.spec_id()} episode {self._episodes}",
                # A ScopedComputer names its agent's scope itself.
                scope=None if self._own_scope else self.agent,
            )
            self._recording = started.recording_id
        with _on_relay(self.computer.cdp, token):
            obs, info = self.env.reset(**kwargs)
        info = dict(info)
        info["agentenv"] = {"scope": self.scope, "recording_id": self._recording}
        return obs, info

    def spec_id(self) -> str:
        """The env's id as registered (``browsergym/miniwob.click-button``)."""
        spec = getattr(self.env, "spec", None)
        found = getattr(spec, "id", None)
        return found if isinstance(found, str) else "browsergym"

    def _end_recording(self, reason: Reason) -> None:
        if self._recording is None:
            return
        recording, self._recording = self._recording, None
        where = self._scoped if self._scoped is not None else self.computer
        manifest: BrowserRecordingManifest = where.recording(
            "end", End, recording_id=recording, reason=reason
        )
        self.recordings.append(manifest)

    def close(self) -> None:
        """BrowserGym's close, the episode's recording ended, the scope closed
        (its token revoked); each is tried whatever the one before did."""
        problems: list[str] = []
        try:
            self.env.close()
        finally:
            try:
                self._end_recording("completed")
            except ComputerError as exc:
                problems.append(f"the episode's recording did not end: {exc}")
            if self._left_open is not None:
                self._left_open.detach()
                self._left_open = None
            if self._scoped is not None:
                problems += close_for(self._scoped)
                self._scoped = None
        if problems:
            raise BrowserGymError("; ".join(problems))


def _close_quietly(scoped: ScopedComputer) -> None:
    """An env's scope closed for an env never closed (its finalizer: at
    collection or the interpreter's exit, where nothing may raise)."""
    with contextlib.suppress(Exception):
        close_for(scoped)


def make(
    env_id: str,
    computer: Computer,
    *,
    scope: bool = True,
    agent: str = "agent",
    upload: Mapping[str, Any] | None = None,
    **env_kwargs: Any,
) -> AgentenvBrowserEnv:
    """``gym.make(env_id, **env_kwargs)`` on ``computer`` (see the module):
    ``computer`` is one the harness holds with its control token
    (:func:`agentenv.harness.computer.deploy`); ``upload`` a
    browser-recording/v1 grant for a recording per episode."""
    if browsergym.core.__version__ != BROWSERGYM_VERSION:
        raise BrowserGymError(
            f"agentenv.browsergym is written against browsergym-core {BROWSERGYM_VERSION}, "
            f"not {browsergym.core.__version__}: pip install 'agentenv[browsergym]'"
        )
    if "pw_chromium_kwargs" in env_kwargs:
        connect_options(env_kwargs["pw_chromium_kwargs"])  # refused now, not at the reset
    return AgentenvBrowserEnv(
        gym.make(env_id, **env_kwargs), computer, scope=scope, agent=agent, upload=upload
    )
