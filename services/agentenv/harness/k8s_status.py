"""What a pod's status says, and what an API server's refusal means, in
words that say what to do (no I/O). :mod:`.kubernetes` watches; this reads."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from agentenv.harness.computer import ComputerError

__all__ = ["RBAC", "Progress", "claim_progress", "progress", "refusal", "short"]

#: What the harness's user or service account needs in the namespace.
RBAC = (
    "pods, services and secrets: create, get, delete; pods: watch; "
    "pods/portforward: get, create; pods/exec: get, create (the run's store's keys)"
)

# A container waiting for one of these will not become ready by waiting longer.
_CANNOT_PULL = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
_CANNOT_START = {
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}


class Progress(NamedTuple):
    """Where a starting pod is: ``ready``, ``waiting`` (``why``: for what) or
    ``failed`` (``why``: what happened and what to do)."""

    state: Literal["ready", "waiting", "failed"]
    why: str


def short(text: Any, limit: int = 300) -> str:
    found = " ".join(str(text or "").split())
    return found if len(found) <= limit else found[: limit - 1] + "…"


def progress(found: Mapping[str, Any]) -> Progress:
    """Where the pod ``found`` is (a Pod as the API serves it: a dict with
    camelCase keys, or a ``V1Pod`` through ``ApiClient.sanitize_for_serialization``)."""
    name = (found.get("metadata") or {}).get("name", "the pod")
    namespace = (found.get("metadata") or {}).get("namespace")
    describe = f"kubectl describe pod {name}" + (f" -n {namespace}" if namespace else "")
    status = found.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    for each in containers:
        waiting = (each.get("state") or {}).get("waiting") or {}
        reason, message = waiting.get("reason"), short(waiting.get("message"))
        said = f"{reason}: {message}" if message else str(reason)
        if reason in _CANNOT_PULL:
            return Progress(
                "failed",
                f"the cluster cannot pull the image {each.get('image') or '?'} ({said}): push "
                "it to a registry the cluster's nodes can pull from (or load it onto them) "
                "and pass --image",
            )
        if reason in _CANNOT_START:
            return Progress(
                "failed",
                f"the {each.get('name', '?')} container of {name} cannot start ({said}); "
                f"see {describe}",
            )
    if phase in ("Failed", "Succeeded"):
        ended = []
        for each in containers:
            done = (each.get("state") or {}).get("terminated")
            if done and (done.get("exitCode") or phase == "Succeeded"):
                ended.append(
                    f"{each.get('name', '?')} {done.get('reason') or 'exited'} "
                    f"(exit {done.get('exitCode')})"
                    + (f": {short(done.get('message'))}" if done.get("message") else "")
                )
        reason = status.get("reason") or ""
        told = "; ".join(
            p for p in (f"{reason}: {short(status.get('message'))}" if reason else "", *ended) if p
        )
        return Progress(
            "failed",
            f"{name} stopped ({phase}{': ' + told if told else ''}); it is not restarted "
            f"(a restarted computer would be a new browser); see {describe}",
        )
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if phase == "Running" and (conditions.get("Ready") or {}).get("status") == "True":
        return Progress("ready", "ready")
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        return Progress(
            "waiting",
            f"not scheduled ({scheduled.get('reason') or '?'}: {short(scheduled.get('message'))})",
        )
    for each in containers:
        waiting = (each.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return Progress("waiting", f"{each.get('name', '?')}: {waiting['reason']}")
    if phase == "Running":
        return Progress("waiting", "running, not ready yet (the readiness probe on /readyz)")
    return Progress("waiting", phase.lower())


# A claim's Ready reasons (agent-sandbox v0.5.6) that waiting does not mend:
# the pool or its template is missing, the claim was refused, or it ended.
_CLAIM_FAILED = {
    "WarmPoolNotFound": "deploy the pool first: kubectl apply -k deploy/kubernetes/pool",
    "TemplateNotFound": "deploy its SandboxTemplate: kubectl apply -k deploy/kubernetes/pool",
    "InvalidMetadata": "the claim's labels or annotations were refused",
    "EnvVarsInjectionRejected": "the pool's template refuses a claim's environment",
    "ClaimExpired": "its shutdown time passed",
    "SandboxExpired": "its sandbox expired",
}


def claim_progress(found: Mapping[str, Any]) -> Progress:
    """Where a SandboxClaim (agent-sandbox's, as the API serves it) is: ready
    when its condition Ready is True and it names its sandbox; failed for the
    reasons waiting does not mend; else waiting (a cold start included)."""
    name = (found.get("metadata") or {}).get("name", "the claim")
    status = found.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None:
        return Progress("waiting", "not taken up by agent-sandbox's controller yet")
    reason, message = ready.get("reason") or "", short(ready.get("message"))
    if reason in _CLAIM_FAILED:
        return Progress(
            "failed",
            f"the claim {name} failed ({reason}: {message}): {_CLAIM_FAILED[reason]}",
        )
    if ready.get("status") == "True":
        if (status.get("sandbox") or {}).get("name"):
            return Progress("ready", "ready")
        return Progress("waiting", "ready, its sandbox not named yet")
    return Progress("waiting", f"{reason}: {message}" if message else reason or "not ready")


def refusal(exc: Any, doing: str) -> ComputerError:
    """A :class:`ComputerError` for the client's ``ApiException`` ``exc`` while
    ``doing`` something: the API server's own message and what to do, never
    the client's dump of the response's headers."""
    status = getattr(exc, "status", None)
    said = ""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        body = json.loads(exc.body)
        said = short(body.get("message")) if isinstance(body, dict) else ""
    if not said:
        reason = str(getattr(exc, "reason", None) or "")
        said = short(reason.splitlines()[0] if reason else "")
    if status == 401:
        hint = "the cluster does not accept these credentials: log in again (kubectl get pods)"
    elif status == 403:
        hint = f"the harness's user or service account needs RBAC for {RBAC}"
    elif status == 404:
        hint = "check that the namespace exists (--namespace)"
    elif status in (None, 0):
        hint = "is the API server reachable?"
    else:
        hint = ""
    text = f"Kubernetes refused {doing} ({status or 'no answer'}): {said or 'no message'}"
    # No status on the error: that is the computer's own, and a refusal here is
    # the infrastructure's, whatever its code.
    return ComputerError(text + (f"; {hint}" if hint else ""))
