"""``python -m agentenv``: the harness's command line."""

from __future__ import annotations

import sys

from agentenv.harness.cli import main

sys.exit(main())
