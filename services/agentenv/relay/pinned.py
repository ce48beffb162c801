"""The commands in the protocol of the Chromium this image ships, as its
``/json/protocol`` lists them: ``pinned.json`` beside this module, written by
``scripts/protocol-commands.sh`` (the data is generated; this module only
reads it, once, at import).

Every one is classified in :mod:`agentenv.relay.commands`; a command not
here is refused as ``unclassified`` until it is looked at. A test compares
this list with the shipped Chromium's protocol and fails on any difference.
``PARAMS`` names each command's parameters: the log keeps only the size of
parameters a command does not take (issue 22: unused ones filled the log).
``IDS`` says where each command takes an id V8 reads (:mod:`agentenv.relay.ids`).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Literal, cast

__all__ = ["CHROMIUM", "COMMANDS", "IDS", "PARAMS", "IdKind"]

_PINNED = json.loads(resources.files(__package__).joinpath("pinned.json").read_text())

#: The Chromium version this list was taken from.
CHROMIUM: str = _PINNED["chromium"]

#: Each command's parameter names, as the protocol lists them.
PARAMS: dict[str, frozenset[str]] = {
    command: frozenset(names) for command, names in _PINNED["params"].items()
}

#: Every command of that protocol.
COMMANDS = frozenset(PARAMS)

#: The kinds of id V8 reads: an execution context's number, an object's or a
#: call frame's ``<isolate>.<context>.<n>``, a unique context id, a script's
#: and a heap snapshot object's decimal.
IdKind = Literal[
    "context", "remote-object", "call-frame", "unique-context", "script", "heap-object"
]

#: command -> where it takes such an id: (path, kind), a path's ``"[]"``
#: standing for each item of a list.
IDS: dict[str, tuple[tuple[tuple[str, ...], IdKind], ...]] = {
    command: tuple((tuple(path), cast(IdKind, kind)) for path, kind in places)
    for command, places in _PINNED["ids"].items()
}
