"""``agentenv run TASK... [--parallel N] [--out DIR]``, ``agentenv check task.yaml``,
``agentenv view RECORDING``, ``agentenv verify RECORDING [--key KEY]`` (also
``python -m agentenv``).

One task file runs as before, its steps on the terminal; several, a folder,
a JSONL of Online-Mind2Web tasks or ``--parallel`` run as a batch
(:mod:`.batch`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agentenv.browsergym_episode import driver_python
from agentenv.harness.backends import BACKENDS
from agentenv.harness.preflight import preflight
from agentenv.harness.profile_steps import with_profile
from agentenv.harness.run_store import StoreOptions, store_problem
from agentenv.harness.runner import EXIT_BAD_INPUT, Run
from agentenv.harness.steps import TaskError, load_task
from agentenv.harness.store import valid_store
from agentenv.harness.task_sources import BrowserGymPlan, pick_envs

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="agentenv", description="Run tasks against browser computers."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run tasks (JSON or YAML files, folders of them, or a JSONL of Online-Mind2Web "
        "tasks) and keep their artifacts",
    )
    run.add_argument("tasks", type=Path, nargs="*", metavar="TASK")
    run.add_argument("--out", type=Path, help="the run folder (default runs/<task>-<time>)")
    run.add_argument(
        "--parallel", type=int, default=1, metavar="N", help="tasks at once (default 1)"
    )
    run.add_argument(
        "--agent",
        metavar="COMMAND",
        help="the agent for Online-Mind2Web tasks (gets AGENTENV_TASK and AGENTENV_CDP_URL)",
    )
    run.add_argument(
        "--image", help="the computer's image for Online-Mind2Web and BrowserGym tasks"
    )
    run.add_argument(
        "--browsergym",
        metavar="SUITE",
        help="a task for each env of a BrowserGym suite (miniwob: browsergym/miniwob.*), "
        "its agent --agent COMMAND (a JSON observation a line on its stdin, an action a "
        "line on its stdout), its reward BrowserGym's, in results.jsonl",
    )
    run.add_argument(
        "--browsergym-tasks",
        metavar="NAMES",
        help="only these envs of the suite, comma-separated (click-button,enter-text)",
    )
    run.add_argument(
        "--browsergym-python",
        metavar="PYTHON",
        help="a Python with agentenv[browsergym] and the suite's package (default: "
        "AGENTENV_BROWSERGYM_PYTHON, else this one)",
    )
    run.add_argument(
        "--browsergym-record",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a recording of each episode (default; --no-browsergym-record measures its cost)",
    )
    run.add_argument(
        "--browsergym-seed", type=int, default=0, metavar="N", help="each episode's seed"
    )
    run.add_argument(
        "--browsergym-max-steps",
        type=int,
        default=10,
        metavar="N",
        help="actions an episode may take (default 10)",
    )
    run.add_argument(
        "--backend",
        choices=list(BACKENDS),
        default="docker",
        help="where computers start: this Docker engine (default), Docker Swarm services, "
        "or Kubernetes pods",
    )
    run.add_argument(
        "--namespace",
        help="the Kubernetes namespace (default: the context's, else default)",
    )
    run.add_argument(
        "--kube-context",
        metavar="CONTEXT",
        help="the kubeconfig context (default: the current one; in a pod, its service account)",
    )
    run.add_argument(
        "--reuse",
        action="store_true",
        help="keep each worker's computer between tasks, reset with data/reset",
    )
    run.add_argument(
        "--scopes-per-computer",
        type=int,
        metavar="K",
        help="tasks a computer of the batch's warm pool serves at once, each in scopes of "
        "its own opened with scopes/open (default 4; 1: a computer per task, as with "
        "--reuse or --store file)",
    )
    run.add_argument(
        "--retries",
        type=int,
        default=1,
        metavar="N",
        help="on scopes, times a task that failed as infrastructure (its computer's "
        "Chromium died, say) is tried again on another computer (default 1)",
    )
    run.add_argument(
        "--store",
        default="local",
        help="where recordings go: local (an S3 server for the run, the default), "
        "s3://bucket/prefix (AWS environment and config), or file (the run folder, "
        "only for computers the run starts)",
    )
    run.add_argument(
        "--store-role",
        metavar="ARN",
        help="a role to assume, with a session policy, for each recording's credentials",
    )
    run.add_argument(
        "--store-share-credentials",
        action="store_true",
        help="when the s3:// store gives no short-lived credentials, hand computers the "
        "harness's own (they reach the whole store)",
    )
    run.add_argument(
        "--store-endpoint",
        metavar="URL",
        help="an s3:// store's address as computers reach it, when not the harness's",
    )
    run.add_argument(
        "--profile",
        metavar="NAME",
        help="load profile NAME from the run's store into the agent's browser before its "
        "turn (a browser_load_profile step; the key in AGENTENV_PROFILE_KEY)",
    )
    run.add_argument(
        "--network",
        metavar="NAME",
        help="a Docker network of this engine that the computers the run starts join, and "
        "the local store too: for a computer attached by URL that is on it, or a site's "
        "containers (every container on it can then reach the store and the computers; "
        "they still need a grant or a token)",
    )
    check = sub.add_parser("check", help="preflight a task without running it")
    check.add_argument("task", type=Path)
    see = sub.add_parser("view", help="write one HTML file to look at a recording")
    see.add_argument("recording", help="a recording's folder, or its s3://bucket/prefix/<id>")
    see.add_argument("--out", type=Path, help="the HTML file (default <recording>/view.html)")
    check_recording = sub.add_parser(
        "verify",
        help="check a recording is whole and signed by its computer: a line per problem, "
        "exit 1 if there is one",
    )
    check_recording.add_argument(
        "recording", help="a recording's folder, or its s3://bucket/prefix/<id>"
    )
    check_recording.add_argument(
        "--key",
        help="the computer's key (ed25519:…, its card's attestation.key) or a file holding it "
        "(default: the key the run pinned, in its metadata.json)",
    )
    door = sub.add_parser(
        "loopback",
        help="a token-free door on 127.0.0.1 to a computer's relay, for chromedriver "
        "(Selenium's debuggerAddress); the token comes from AGENTENV_TOKEN",
    )
    door.add_argument("cdp", metavar="CDP_URL", help="the relay, such as http://127.0.0.1:9222")
    args = parser.parse_args(argv)
    if args.command == "view":
        return _view(args.recording, args.out)
    if args.command == "loopback":
        return _loopback(args.cdp)
    if args.command == "verify":
        return _verify(args.recording, args.key)
    if args.command == "run" and not valid_store(args.store):
        print(
            f"agentenv: --store {args.store!r} is not a store: give local, file or "
            "s3://bucket/prefix; nothing was deployed",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.command == "run" and args.store in ("local", "file") and args.store_endpoint:
        print(
            f"agentenv: --store-endpoint is for an s3:// store; the {args.store} store's "
            "address is the harness's to choose (--network puts it on a network you name); "
            "nothing was deployed",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if (
        args.command == "run"
        and args.backend != "kubernetes"
        and (args.namespace or args.kube_context)
    ):
        print(
            "agentenv: --namespace and --kube-context are for --backend kubernetes; "
            "nothing was deployed",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.command == "run" and not args.tasks and not args.browsergym:
        print(
            "agentenv: name TASK files (or a folder, or a .jsonl), or --browsergym SUITE",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.command == "run" and (
        args.browsergym
        or len(args.tasks) > 1
        or args.parallel != 1
        or args.tasks[0].is_dir()
        or args.tasks[0].suffix == ".jsonl"
        or args.reuse
        or args.backend != "docker"
        or args.scopes_per_computer is not None
    ):
        if args.profile:
            print(
                "agentenv: --profile runs one task: for a batch, add a "
                "browser_load_profile step to its tasks",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        return _batch(args)
    path = args.task if args.command == "check" else args.tasks[0]
    try:
        task = load_task(path)
    except TaskError as exc:
        print(f"agentenv: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "run" and args.profile:
        task = with_profile(task, args.profile)
    problems = [str(p) for p in preflight(task)]
    if args.command == "run":
        found = store_problem(_store_options(args), task, args.backend)
        problems += [found] if found is not None else []
    if problems:
        return _refused(str(path), problems)
    if args.command == "check":
        print(f"agentenv: {path}: {len(task.steps)} steps, no problems")
        return 0
    out = args.out or Path("runs") / f"{path.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    return Run(task, out, store_options=_store_options(args)).run()


def _store_options(args: argparse.Namespace) -> StoreOptions:
    """The run's store, as Run and Batch take it."""
    return StoreOptions(
        spec=args.store,
        role_arn=args.store_role,
        computer_endpoint_url=args.store_endpoint,
        share_own=args.store_share_credentials,
        network=args.network,
    )


def _batch(args: argparse.Namespace) -> int:
    from agentenv.harness.batch import Batch
    from agentenv.harness.task_sources import plan

    if args.parallel < 1:
        print("agentenv: --parallel takes 1 or more", file=sys.stderr)
        return EXIT_BAD_INPUT
    if (args.reuse or args.backend != "docker") and args.store == "file":
        print(
            f"agentenv: {'--reuse' if args.reuse else '--backend ' + args.backend} starts "
            "computers without the run folder: use the default store, or --store s3://; "
            "nothing was deployed",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    per_computer = _per_computer(args)
    if per_computer is None:
        return EXIT_BAD_INPUT
    try:
        gym = _browsergym(args) if args.browsergym else None
        tasks = plan(args.tasks, args.agent, args.image, gym)
    except TaskError as exc:
        print(f"agentenv: {exc}; nothing was deployed", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path("runs") / f"batch-{time.strftime('%Y%m%d-%H%M%S')}"
    batch = Batch(
        tasks,
        out,
        parallel=args.parallel,
        reuse=args.reuse,
        backend=args.backend,
        namespace=args.namespace,
        kube_context=args.kube_context,
        store_options=_store_options(args),
        scopes_per_computer=per_computer,
        retries=args.retries,
    )
    problems = batch.problems()
    if problems:
        return _refused("the tasks", problems)
    return batch.run()


def _browsergym(args: argparse.Namespace) -> BrowserGymPlan:
    """``--browsergym SUITE``'s envs, as the driver lists them in the
    BrowserGym Python (the harness's own may not have BrowserGym)."""
    import re
    import subprocess

    suite: str = args.browsergym
    if not re.fullmatch(r"[a-z0-9_]+", suite):
        raise TaskError(f"--browsergym {suite!r}: a suite is a name such as miniwob")
    if args.browsergym_max_steps < 1:
        raise TaskError("--browsergym-max-steps takes 1 or more")
    python = driver_python(args.browsergym_python)
    try:
        listed = subprocess.run(
            [python, "-m", "agentenv.browsergym_episode", "--list", suite],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TaskError(f"--browsergym: {python} did not list the suite: {exc}") from None
    if listed.returncode != 0:
        last = (listed.stderr.strip().splitlines() or ["no output"])[-1]
        raise TaskError(
            f"--browsergym {suite}: {python} could not list it ({last}); install "
            f"agentenv[browsergym] and browsergym-{suite} there, or name another "
            "with --browsergym-python"
        )
    names = [n for n in (args.browsergym_tasks or "").split(",") if n.strip()]
    envs = pick_envs(suite, listed.stdout.split(), [n.strip() for n in names])
    return BrowserGymPlan(
        envs,
        seed=args.browsergym_seed,
        max_steps=args.browsergym_max_steps,
        python=args.browsergym_python,
        record=args.browsergym_record,
    )


def _per_computer(args: argparse.Namespace) -> int | None:
    """K, the tasks a computer serves at once (None: refused, said why)."""
    from agentenv.harness.batch import DEFAULT_SCOPES_PER_COMPUTER

    asked: int | None = args.scopes_per_computer
    if args.retries < 0:
        print("agentenv: --retries takes 0 or more; nothing was deployed", file=sys.stderr)
        return None
    if asked is not None and asked < 1:
        print(
            "agentenv: --scopes-per-computer takes 1 or more; nothing was deployed",
            file=sys.stderr,
        )
        return None
    whole = "--reuse" if args.reuse else "--store file" if args.store == "file" else None
    if whole is None:
        return asked or DEFAULT_SCOPES_PER_COMPUTER
    if asked is not None and asked > 1:
        print(
            f"agentenv: {whole} gives each task a computer of its own: drop it, or give "
            "--scopes-per-computer 1; nothing was deployed",
            file=sys.stderr,
        )
        return None
    return 1


def _refused(what: str, problems: list[str]) -> int:
    """Preflight's problems, every one, and the exit status for bad input."""
    print(f"agentenv: {what}: {len(problems)} problem(s); nothing was deployed:", file=sys.stderr)
    for problem in problems:
        print(f"  {problem}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _loopback(cdp: str) -> int:
    """``agentenv loopback CDP_URL``: serve until interrupted."""
    import os
    import signal
    import threading

    from agentenv.harness.loopback import Loopback, LoopbackError

    token = os.environ.get("AGENTENV_TOKEN")
    if not token:
        print(
            "agentenv: set AGENTENV_TOKEN to the agent's token (it never goes on a command "
            "line); nothing was opened",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        door = Loopback(cdp, token)
        address = door.open()
    except LoopbackError as exc:
        print(f"agentenv: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"debuggerAddress: {address}  (Ctrl-C closes it)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    door.close()
    return 0


def _view(recording: str, out: Path | None) -> int:
    from agentenv.harness.viewer import view

    try:
        written = view(recording, out)
    except (OSError, ValueError) as exc:
        print(f"agentenv: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"agentenv: wrote {written}")
    return 0


def _verify(recording: str, key: str | None) -> int:
    """``agentenv verify``: 0 whole and signed, 1 a problem (one line each), 2
    nothing to check against (no key, no key in what was given, no folder).
    The last line names the key checked against and where it came from."""
    from agentenv.harness.attest import VerifyError, checking_key, verify

    breaks: list[str] = []
    try:
        pinned, where = checking_key(recording, key)
        problems = verify(recording, pinned, breaks)
    except (VerifyError, OSError) as exc:
        print(f"agentenv: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for problem in problems:
        print(problem)
    for named in breaks:  # the computer's own record of a crash: shown, not a problem
        print(f"break (named by the computer, not a problem): {named}")
    if not recording.startswith("s3://") and (Path(recording) / "view.html").exists():
        print(
            "agentenv: view.html is not checked (agentenv view's page, not the computer's): "
            "write it again with agentenv view before trusting what it shows",
            file=sys.stderr,
        )
    against = f"{pinned} ({where})"
    if problems:
        print(
            f"agentenv: {recording}: {len(problems)} problem(s), against the key {against}",
            file=sys.stderr,
        )
        return 1
    print(f"agentenv: {recording}: whole, and signed by its computer's key {against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
