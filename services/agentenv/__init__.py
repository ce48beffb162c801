"""agentenv: a browser computer for AI agents.

One container runs Chromium behind a CDP relay (the only door to the
browser), an app server and a recorder under supervisord. See
``shared/ARCHITECTURE.md`` for the design and ``README.md`` for use.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
