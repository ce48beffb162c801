"""The relay's own isolated worlds, kept out of every agent's reach (docs/spec.md
section 7, "The relay's own worlds"). No I/O.

The password check and the naming of what a press lands on run as script in
an isolated world the relay makes in each page's main frame (the page's own
script cannot reach it, so it cannot change what the DOM's getters tell the
checks). An agent's CDP connection to the same tab could: the world is an
execution context like any other, reachable by its numeric id (small,
sequential, guessable), its unique id, an object that lives in it, a call
frame paused in it, or its name. Whoever runs code there redefines a getter
and every later check in that document says "not a password" (the red
team's critical finding). So:

- **Names no one can predict.** Every world gets a fresh name under a prefix
  made at random when the relay starts (:meth:`RelayWorlds.fresh_name`), so
  ``Page.createIsolatedWorld`` or ``Runtime.addBinding`` by name never lands
  in it. Each expression the relay runs ends with a fresh comment
  (:meth:`RelayWorlds.sealed`): no two scripts are the same, so none is
  served again from a compilation cache, and no hash of one can be known.
- **Marked.** A world is marked with a secret when it is made, and every
  check first looks for the mark: a context number gone stale (a new
  renderer process numbers its contexts from 1 again) never runs a check in
  the page's own world, where the page's script could answer it.
- **Never listed.** ``Runtime.executionContextCreated`` and ``…Destroyed`` of
  a relay world, and ``Debugger.scriptParsed`` of its scripts, are dropped on
  the way to every client (:meth:`RelayWorlds.hides`). A ``Debugger.paused``
  in one is dropped and the session resumed at once: no client ever holds a
  frame of the relay's.
- **Never named.** A command on the tab's own session that names a relay
  world where the protocol reads an id (:func:`agentenv.relay.ids.found`:
  ``contextId``, ``executionContextId``, ``uniqueContextId``, an object's
  or call frame's ``<isolate>.<context>.<n>``, a ``scriptId`` of the
  relay's) is refused with rule ``relay-world``
  (:meth:`RelayWorlds.named_in`), and answered as Chromium answers an id
  it does not know: the refusal tells no agent which number is the
  world's. Ids are read as V8 reads them, and only in the form V8 writes
  them (any other is refused first, rule ``malformed-id``), and the relay
  sends the command as it read it (:func:`agentenv.relay.ids.encode`).
  ``Debugger.setReturnValue`` while a pause in one is being undone is
  refused too. A breakpoint condition would run in every script its
  pattern matches, the relay's included: a condition is taken with an
  exact ``url`` only (the relay's scripts have none), see
  :mod:`agentenv.relay.guard`.

Context ids are per renderer process and per tab: one is refused only on
a session whose target is that tab (or its page endpoint). A session on
another target (an out-of-process frame, a worker) lives in another id
space and is never refused for a number that happens to match.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentenv.relay import ids

__all__ = ["RelayWorlds"]

#: The global that holds a world's mark (in the relay's world only).
_MARK = "__agentenvMark"


@dataclass
class RelayWorlds:
    """What the relay knows of its own worlds, shared by the watcher (which
    makes and uses them) and every client connection (which hides them).

    One world per tab is in use, the one in its current document; an older
    one is forgotten (nothing of the relay's runs there again, so reaching it
    gains nothing), so its number is never refused once a new process
    numbers its contexts from 1 again."""

    #: The secret part of every world's name (never sent anywhere but Chromium).
    prefix: str = field(default_factory=lambda: "agentenv-" + secrets.token_hex(12))
    #: tab -> the context id of the relay's world in its document.
    contexts: dict[str, int] = field(default_factory=dict)
    #: tab -> that world's mark: a secret only script in that world holds
    #: (:meth:`sealed`), so a number gone stale never runs a check elsewhere.
    marks: dict[str, str] = field(default_factory=dict)
    #: tab -> that world's unique id, as Chromium's events name it.
    unique: dict[str, str] = field(default_factory=dict)
    #: tab -> ids of the scripts the relay ran in that world.
    scripts: dict[str, set[str]] = field(default_factory=dict)
    #: tab -> every context of the relay's worlds in it, as the watcher's own
    #: session hears them made and destroyed: its world in the main frame,
    #: and in each same-origin frame a check looked into (Blink makes the
    #: world there too, and from it ``parent`` is the main frame's).
    every: dict[str, set[int]] = field(default_factory=dict)
    #: Tabs whose world is being made: its number is not known yet.
    making: set[str] = field(default_factory=set)
    #: tab -> the call frames of the pause shown to clients on the tab's own
    #: target (a ``Debugger.paused`` passed on), until it resumes: the only
    #: frames a command may name there. V8 runs ``evaluateOnCallFrame`` in the
    #: frame its id's last part numbers in whatever pause is current, in any
    #: world, whatever context its middle part names: a pause in the relay's
    #: world (hidden, undone) was reached by an id naming the page's context.
    shown: dict[str, frozenset[str]] = field(default_factory=dict)

    def fresh_name(self) -> str:
        return f"{self.prefix}-{secrets.token_hex(8)}"

    def begin(self, tab: str) -> str:
        """A world is to be made in ``tab``: the old one is forgotten; its name."""
        self.forget(tab)
        self.making.add(tab)
        return self.fresh_name()

    def made(self, tab: str, context: int) -> str:
        """The world in ``tab`` is ``context``: the script that marks it."""
        self.contexts[tab] = context
        self.scripts[tab] = set()
        self.making.discard(tab)
        mark = secrets.token_hex(16)
        self.marks[tab] = mark
        # Fixed for good: a binding an agent adds to every context of the tab
        # (Runtime.addBinding with no context) cannot replace it. The
        # intrinsic reached through a literal, not a global name a binding
        # could have replaced.
        return f"({{}}).constructor.defineProperty(this, {_MARK!r}, {{value: {mark!r}}}); true"

    def forget(self, tab: str) -> None:
        """The tab's world in use is gone (destroyed with its document, or
        given up after an error); its contexts in frames go when destroyed."""
        self.contexts.pop(tab, None)
        self.marks.pop(tab, None)
        self.unique.pop(tab, None)
        self.scripts.pop(tab, None)
        self.making.discard(tab)

    def gone(self, tab: str) -> None:
        """The tab closed, or all its contexts were cleared."""
        self.forget(tab)
        self.every.pop(tab, None)
        self.shown.pop(tab, None)

    def heard(self, tab: str, method: str, params: Mapping[str, Any]) -> None:
        """An event of the watcher's own session on ``tab`` (Runtime on):
        the relay's contexts made and destroyed, in every frame."""
        if method == "Runtime.executionContextCreated":
            context = params.get("context")
            if isinstance(context, Mapping) and self.ours(context.get("name")):
                number = context.get("id")
                if isinstance(number, int):
                    self.every.setdefault(tab, set()).add(number)
        elif method == "Runtime.executionContextDestroyed":
            number = params.get("executionContextId")
            self.every.get(tab, set()).discard(number)
            if number == self.contexts.get(tab):
                self.forget(tab)
        elif method == "Runtime.executionContextsCleared":
            self.gone(tab)

    def _numbers(self, tab: str) -> set[int]:
        found = set(self.every.get(tab, ()))
        main = self.contexts.get(tab)
        if main is not None:
            found.add(main)
        return found

    def sealed(self, tab: str, expression: str) -> str:
        """``expression`` as it runs in the tab's world: only where the mark
        is (else "undecided", which no check clears), and ending with a fresh
        comment, so no two scripts are alike (no cache serves one again, no
        hash of one can be known)."""
        mark = self.marks.get(tab, secrets.token_hex(16))
        return (
            f'(this.{_MARK} === {mark!r} ? ({expression}) : "undecided")\n//{secrets.token_hex(8)}'
        )

    def ours(self, name: object) -> bool:
        return isinstance(name, str) and name.startswith(self.prefix)

    def any_in(self, tab: str | None) -> bool:
        return tab is not None and (
            tab in self.contexts or tab in self.making or bool(self.every.get(tab))
        )

    # -- Chromium to a client ---------------------------------------------------

    def hides(self, tab: str | None, method: str, params: Mapping[str, Any]) -> bool:
        """Whether an event of the tab's own session is about a relay world
        (and learn what it names: a world's unique id, a script's id)."""
        if method == "Runtime.executionContextCreated":
            context = params.get("context")
            if not isinstance(context, Mapping) or not self.ours(context.get("name")):
                return False
            unique = context.get("uniqueId")
            same = tab is not None and context.get("id") == self.contexts.get(tab)
            if same and tab is not None and isinstance(unique, str):
                self.unique[tab] = unique
            return True
        if method == "Runtime.executionContextDestroyed":
            unique = params.get("executionContextUniqueId")
            number = params.get("executionContextId")
            return (isinstance(unique, str) and unique in self.unique.values()) or (
                tab is not None and number in self._numbers(tab)
            )
        if tab is None or not self.any_in(tab):
            return False
        if method == "Runtime.bindingCalled":
            # A binding added to every context is in the relay's world too:
            # its calls there would tell the world's number and what a check read.
            return params.get("executionContextId") in self._numbers(tab)
        if method in ("Debugger.scriptParsed", "Debugger.scriptFailedToParse"):
            if params.get("executionContextId") not in self._numbers(tab):
                return False
            script = params.get("scriptId")
            if isinstance(script, str):
                self.scripts.setdefault(tab, set()).add(script)
            return True
        return False

    def pause_shown(self, tab: str | None, params: Mapping[str, Any]) -> None:
        """A ``Debugger.paused`` of the tab's own target goes on to a client:
        its frames are the ones commands may name until it resumes."""
        if tab is None:
            return
        frames = params.get("callFrames")
        ids = (
            frozenset(
                f["callFrameId"]
                for f in frames
                if isinstance(f, Mapping) and isinstance(f.get("callFrameId"), str)
            )
            if isinstance(frames, list)
            else frozenset()
        )
        self.shown[tab] = ids

    def resumed(self, tab: str | None) -> None:
        """The tab's pause ended, or is about to (a client asked it to go on):
        no frame of it may be named again."""
        if tab is not None:
            self.shown.pop(tab, None)

    def paused_in(self, tab: str | None, params: Mapping[str, Any]) -> bool:
        """Whether a ``Debugger.paused`` stopped in a relay world."""
        frames = params.get("callFrames")
        if tab is None or not isinstance(frames, list) or not frames:
            return False
        numbers, scripts = self._numbers(tab), self.scripts.get(tab, set())
        for frame in frames:  # any frame of the stack, not only the top one
            if not isinstance(frame, Mapping):
                continue
            location = frame.get("location")
            script = location.get("scriptId") if isinstance(location, Mapping) else None
            if ids.context_of(frame.get("callFrameId")) in numbers or (
                isinstance(script, str) and script in scripts
            ):
                return True
        return False

    # -- a client to Chromium ---------------------------------------------------

    def named_in(
        self, tab: str | None, method: str, params: Mapping[str, Any] | None
    ) -> tuple[str, Any] | None:
        """Where a command's params name a relay world of ``tab`` (an id at one
        of the places the protocol reads one, :func:`agentenv.relay.ids.found`)
        and the id, or None. Ids not in V8's own form never get here (rule
        ``malformed-id``)."""
        if not params or tab is None:
            return None
        contexts = self._numbers(tab)
        for kind, where, value in ids.found(method, params):
            if kind == "context":
                hit = value in contexts
            elif kind == "remote-object" or kind == "call-frame":
                hit = ids.context_of(value) in contexts
            elif kind == "script":
                hit = value in self.scripts.get(tab, ())
            elif kind == "unique-context":
                hit = value == self.unique.get(tab)
            else:  # heap-object: any world's object (the core refuses those)
                hit = False
            if hit:
                return where, value
        return None

    def names_a_context(self, method: str, params: Mapping[str, Any] | None) -> bool:
        """Whether params name any execution context (its number, an object
        or a call frame in it): such a command waits while a world is being
        made in its tab, whose number the relay does not know yet."""
        return any(kind in _CONTEXT_KINDS for kind, _, _ in ids.found(method, params))


#: Id kinds that name an execution context.
_CONTEXT_KINDS = frozenset({"context", "remote-object", "call-frame", "unique-context"})
