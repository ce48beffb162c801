"""The harness: run a task of typed steps against browser computers (docs/spec.md section 5).

Runs on the host (``agentenv run task.yaml``, or ``python -m agentenv``) and
imports nothing of the computer but :mod:`agentenv.protocol`.

- :mod:`.steps` — the task file: envs with versions, steps as one tagged union;
- :mod:`.preflight` — every problem listed before anything deploys (no I/O);
- :mod:`.url_compare` — tabs by URL, normalized as the browser does (no I/O);
- :mod:`.computer` — a computer's API (each body its op's protocol model),
  deployed with the docker SDK or attached;
- :mod:`.backends` — where computers start: Docker (:mod:`.engine`, hardened
  by :mod:`.hardening`), Swarm (:mod:`.swarm`) or Kubernetes (:mod:`.kubernetes`,
  with its objects in :mod:`.k8s_objects`, what a pod's status says in
  :mod:`.k8s_status`, and :mod:`.port_forward`);
- :mod:`.loopback` — a door for clients that cannot send a token (chromedriver);
- :mod:`.store` — where recordings go: the stores' layout, policies, S3 and
  folder stores; :mod:`.local_store` (the run's own, with :mod:`.storeserver`,
  its program) and :mod:`.run_store` (a run's store, opened once);
- :mod:`.mind2web` and :mod:`.words` — Online-Mind2Web's v2 export, and the
  words a judge reads for each action;
- :mod:`.viewer` — ``agentenv view``: one recording as a page;
- :mod:`.attest` — ``agentenv verify``, the keys a run pins and the evidence
  it keeps of each recording;
- :mod:`.runner` — the run: steps (one handler a step type), progress, artifacts,
  exit status, with :mod:`.agent_process` (an agent's process);
  :mod:`.batch` — many tasks at once, its computers' counts summed by
  :mod:`.fleet`; :mod:`.cli`; :mod:`.harness_errors`.
"""

from __future__ import annotations

__all__: list[str] = []
