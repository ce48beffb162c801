"""agentenv: a browser computer for AI agents.

One container runs Chromium behind a CDP relay (the only door to the
browser), an app server and a recorder under supervisord. See
``docs/architecture.md`` for the design and ``README.md`` for use.

- :mod:`.relay`, :mod:`.app`, :mod:`.recorder` — the computer's three programs;
- :mod:`.log` — the action log; :mod:`.protocol` — the wire models, both ways;
- :mod:`.harness` — ``agentenv run``, on the host;
- shared by them: :mod:`.settings` (every setting, read once), :mod:`.access`
  (who is who), :mod:`.errors` (the one error root), :mod:`.http` (error
  bodies, bounded reads, the error middleware), :mod:`.relay_link` (the programs'
  link to the relay) over :mod:`.calls` (commands and answers by id),
  :mod:`.metrics`, :mod:`.paths`, :mod:`.downloads` (a downloads folder's
  files, listed and opened safely), :mod:`.process` (how a program runs),
  :mod:`.signing` (the computer's key, made at boot).
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
