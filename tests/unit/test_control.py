"""The relay's ``AgentEnv.*`` answers (relay/control_commands.py) that need no browser."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from agentenv.access import Identity
from agentenv.log.writer import LogWriter
from agentenv.protocol.control import OTHER_SCOPE, Open, OpenEntries
from agentenv.relay.client_state import ClientState
from agentenv.relay.control_commands import Control
from agentenv.relay.logbook import Logbook
from agentenv.relay.tokens import Granted
from agentenv.scopes import Scope


def _pending(book: Logbook, scope: Scope | None) -> Open:
    state = ClientState(9, Identity("agentenv", control=True), scope=scope)
    control = Control(state, book, cast(Any, None), Granted())
    return asyncio.run(control._pending(OpenEntries()))


def test_a_scoped_link_learns_which_entries_are_open_but_not_whose(tmp_path: Path) -> None:
    book = Logbook(LogWriter.open(tmp_path / "log.jsonl"))
    alice = book.writer.begin({"via": "cdp", "who": "alice", "scope": "alice"})
    bob = book.writer.begin({"via": "cdp", "who": "bob", "scope": "bob"})
    nobody = book.writer.begin({"via": "cdp", "who": "carol"})
    every = _pending(book, None).entries
    assert every == {str(alice): "alice", str(bob): "bob", str(nobody): None}
    mine = _pending(book, Scope("alice", "CTX-A")).entries
    assert mine == {str(alice): "alice", str(bob): OTHER_SCOPE, str(nobody): OTHER_SCOPE}
    assert "bob" not in str(mine)
