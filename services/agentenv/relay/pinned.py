"""The commands in the protocol of the Chromium this image ships, as its
``/json/protocol`` lists them: ``pinned.json`` beside this module, written by
``scripts/protocol-commands.sh`` (the data is generated; this module only
reads it, once, at import).

Every one is classified in :mod:`agentenv.relay.commands`; a command not
here is refused as ``unclassified`` until it is looked at. A test compares
this list with the shipped Chromium's protocol and fails on any difference.
``PARAMS`` names each command's parameters: the log keeps only the size of
parameters a command does not take (issue 22: unused ones filled the log).
"""

from __future__ import annotations

import json
from importlib import resources

__all__ = ["CHROMIUM", "COMMANDS", "PARAMS"]

_PINNED = json.loads(resources.files(__package__).joinpath("pinned.json").read_text())

#: The Chromium version this list was taken from.
CHROMIUM: str = _PINNED["chromium"]

#: Each command's parameter names, as the protocol lists them.
PARAMS: dict[str, frozenset[str]] = {
    command: frozenset(names) for command, names in _PINNED["params"].items()
}

#: Every command of that protocol.
COMMANDS = frozenset(PARAMS)
