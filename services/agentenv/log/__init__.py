"""The action log: one JSON line per action and tab event (docs/spec.md section 1).

Pure parts, free of I/O and unit-tested on their own (which CDP methods act
and which read is the relay's protocol table, :mod:`agentenv.relay.commands`):

- :mod:`.redact` — secrets out of every text and value before it is written;
- :mod:`.cdp_params` — a CDP command's params as the log keeps them, method by method;
- :mod:`.bodies` — request and response bodies as a recording's network log
  keeps them: what a page sends withheld unless shown harmless;
- :mod:`.argpaths` — paths into arguments: typed text withheld and put back, files named;
- :mod:`.log_errors` — the log's exceptions;
- :mod:`.lines` — the line kinds and their encoding;
- :mod:`.numbering` — numbers taken at begin, stalled actions, restart recovery
  (the hash chain itself is :mod:`agentenv.protocol.chain`, which the harness
  checks with).

I/O:

- :mod:`.writer` — the single writer (``O_APPEND``, one ``os.write`` a line,
  an ``fcntl`` lock);
- :mod:`.reader` — ``log {after, limit}`` from an incremental index of offsets.
"""

from __future__ import annotations

__all__: list[str] = []
