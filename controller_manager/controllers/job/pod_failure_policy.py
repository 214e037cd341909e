"""Matching a failed pod against a Job's ``podFailurePolicy`` (``pkg/controller/job/pod_failure_policy.go``).

Guarantees of :func:`match_pod_failure_policy`: rules are tried in order and the first match decides.
- ``onExitCodes`` matches a *terminated* container (regular containers first, then init containers), optionally
  only the one named ``containerName``, with a non-zero exit code ``In``/``NotIn`` the values.
- ``onPodConditions`` matches a pod condition of the pattern's type and status (status defaults to True).
- The result is ``(fail_job_message, count_failed, action)``: ``FailJob`` gives a message in upstream's words,
  ``Ignore`` does not count the failure against backoffLimit, ``Count`` and ``FailIndex`` do; no match (or no
  policy) counts the failure with no action. Unknown actions and operators never match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta

Obj = Mapping[str, Any]

ACTION_FAIL_JOB = "FailJob"
ACTION_FAIL_INDEX = "FailIndex"
ACTION_IGNORE = "Ignore"
ACTION_COUNT = "Count"


def _status(pod: Obj) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if isinstance(status, Mapping) else {}


def _exit_code_matches(code: int, requirement: Obj) -> bool:
    values = [v for v in requirement.get("values") or () if isinstance(v, int)]
    operator = requirement.get("operator")
    if operator == "In":
        return code in values
    if operator == "NotIn":
        return code not in values
    return False


def _matching_container(statuses: Sequence[Any], requirement: Obj) -> Obj | None:
    wanted = requirement.get("containerName")
    for cs in statuses:
        if not isinstance(cs, Mapping):
            continue
        terminated = (cs.get("state") or {}).get("terminated")
        if not isinstance(terminated, Mapping):
            continue  # still running or terminating: no exit code yet
        if wanted is not None and wanted != cs.get("name"):
            continue
        code = terminated.get("exitCode")
        if isinstance(code, int) and code != 0 and _exit_code_matches(code, requirement):
            return cs
    return None


def match_on_exit_codes(pod: Obj, requirement: Obj) -> Obj | None:
    status = _status(pod)
    found = _matching_container(status.get("containerStatuses") or (), requirement)
    if found is not None:
        return found
    return _matching_container(status.get("initContainerStatuses") or (), requirement)


def match_on_pod_conditions(pod: Obj, patterns: Sequence[Any]) -> Obj | None:
    for cond in _status(pod).get("conditions") or ():
        if not isinstance(cond, Mapping):
            continue
        for pattern in patterns:
            if (isinstance(pattern, Mapping) and cond.get("type") == pattern.get("type")
                    and cond.get("status") == (pattern.get("status") or "True")):
                return cond
    return None


def match_pod_failure_policy(policy: Obj | None, pod: Obj) -> tuple[str | None, bool, str | None]:
    """``(fail_job_message, count_failed, action)`` for a failed pod (``matchPodFailurePolicy``)."""
    if policy is None:
        return None, True, None
    m = meta(pod)
    pod_ref = f"{m.get('namespace', '')}/{m.get('name', '')}"
    for index, rule in enumerate(policy.get("rules") or ()):
        if not isinstance(rule, Mapping):
            continue
        action = rule.get("action")
        on_exit = rule.get("onExitCodes")
        on_conditions = rule.get("onPodConditions")
        message: str | None = None
        if isinstance(on_exit, Mapping):
            container = match_on_exit_codes(pod, on_exit)
            if container is None:
                continue
            code = container["state"]["terminated"]["exitCode"]
            message = (f"Container {container.get('name', '')} for pod {pod_ref} failed with exit code {code} "
                       f"matching {action} rule at index {index}")
        elif isinstance(on_conditions, Sequence) and not isinstance(on_conditions, str):
            cond = match_on_pod_conditions(pod, on_conditions)
            if cond is None:
                continue
            message = f"Pod {pod_ref} has condition {cond.get('type')} matching {action} rule at index {index}"
        else:
            continue
        if action == ACTION_IGNORE:
            return None, False, ACTION_IGNORE
        if action == ACTION_FAIL_INDEX:
            return None, True, ACTION_FAIL_INDEX
        if action == ACTION_COUNT:
            return None, True, ACTION_COUNT
        if action == ACTION_FAIL_JOB:
            return message, True, ACTION_FAIL_JOB
        # An unknown action: upstream's switch falls through to the next rule.
    return None, True, None
