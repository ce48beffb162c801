"""The recorder: ``browser-recording/v1`` (docs/spec.md section 4).

A recording takes a frame at its start, one after each burst of agent
actions settles, and one at its end, each keyed to the log entries it
follows, and uploads frames, the log's lines between start and end, and a
manifest as it goes.

- :mod:`.bursts` — burst timing and the frame's tab (no I/O, fake clock);
- :mod:`.grants` — where and how to upload: folders and S3-compatible stores,
  each file's SHA-256 kept as it goes;
- :mod:`.journal` — what each open recording wrote (its start, each file
  uploaded and its hash, each frame), in the service user's folder beside
  the key: a recorder killed mid-recording and restarted by supervisord ends
  the recording from it, with a manifest rebuilt (``rebuilt_why``) and signed;
- :mod:`.provenance` — what the computer is (image digest, Chromium, key),
  and the one place a manifest is signed;
- :mod:`.recording_life` — one recording's life (its screenshots are
  :func:`agentenv.relay_link.capture`'s, never bringing a tab forward), with
  what a start may add: :mod:`.video` (the agent's tab as H.264 chunks) and
  :mod:`.har` (``network.har``, secrets out; :mod:`.typed`: what the log
  says was typed into password fields, by tab, for its bodies' window);
- :mod:`.recorder_server` — the HTTP ops; :mod:`.recorder_errors`.
"""

from __future__ import annotations

__all__: list[str] = []
