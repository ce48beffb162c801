"""The harness: run a task of typed steps against browser computers (SPEC.md section 5).

Runs on the host (``agentenv run task.yaml``, or ``python -m agentenv``) and
imports nothing of the computer but :mod:`agentenv.protocol`.

- :mod:`.steps` — the task file: envs with versions, steps as one tagged union;
- :mod:`.preflight` — every problem listed before anything deploys (no I/O);
- :mod:`.urls` — tabs by URL, normalized as the browser does (no I/O);
- :mod:`.computer` — a computer's API, deployed with the docker SDK or attached;
- :mod:`.backends` — where computers start: Docker, Swarm (:mod:`.swarm`) or
  Kubernetes (:mod:`.kubernetes`);
- :mod:`.mind2web` — Online-Mind2Web's v2 export;
- :mod:`.runner` — the run: steps, progress, artifacts, exit status; :mod:`.cli`.
"""

from __future__ import annotations

__all__: list[str] = []
