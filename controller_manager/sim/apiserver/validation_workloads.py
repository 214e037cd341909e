"""Validation of the workload kinds (pkg/apis/apps/validation, pkg/apis/batch/validation).

Deployments, ReplicaSets, DaemonSets and StatefulSets: selector required and non-empty, selector
matching the template labels, replicas and other counts non-negative, restartPolicy Always,
strategy rules (RollingUpdate maxSurge/maxUnavailable), selector immutable on update. Jobs:
counts non-negative, OnFailure/Never restart policy, generated selector checks, selector,
completionMode and template immutable (a suspended, never-started Job may change its scheduling
directives). CronJobs: schedule parseable as robfig/cron's ParseStandard, no ``TZ=`` in the
schedule, an IANA ``timeZone``, concurrency policy, job template rules, names of at most 52 bytes.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from typing import Any

from controller_manager.api.cron import ScheduleError, UnknownTimeZone, parse_standard
from controller_manager.api.selectors import InvalidSelector, from_label_selector
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    forbidden,
    go_json,
    int_or_string_repr,
    invalid,
    label_selector_repr,
    not_supported,
    required,
    string_map,
)
from controller_manager.sim.apiserver.validation_pods import validate_labels, validate_pod_template

MAX_PARALLELISM_INDEXED = 100_000
_NONNEG = "must be greater than or equal to 0"
_TEMPLATE_REPR = GoRepr("core.PodTemplateSpec{...}")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def nonneg(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid(path, value, _NONNEG)]
    return []


def _template_labels(spec: Mapping[str, Any]) -> Any:
    return _dict(_dict(spec.get("template")).get("metadata")).get("labels")


def _selector(spec: Mapping[str, Any], path: str, what: str, *, required_selector: bool = True
              ) -> tuple[list[FieldError], Any]:
    """Selector presence/emptiness/syntax; returns the parsed selector (None when unusable)."""
    errs: list[FieldError] = []
    sel = spec.get("selector")
    if sel is None:
        if required_selector:
            errs.append(required(f"{path}.selector"))
    else:
        sel_map = _dict(sel)
        if not sel_map.get("matchLabels") and not sel_map.get("matchExpressions"):
            errs.append(invalid(f"{path}.selector", label_selector_repr(sel), f"empty selector is invalid for {what}"))
    try:
        parsed = from_label_selector(sel if sel is None else _dict(sel))
    except InvalidSelector as e:
        errs.append(invalid(f"{path}.selector", label_selector_repr(sel), f"invalid label selector: {e}"))
        return errs, None
    return errs, parsed


def _selector_matches(parsed: Any, spec: Mapping[str, Any], path: str) -> list[FieldError]:
    labels = _template_labels(spec)
    if parsed is not None and not parsed.is_empty() and not parsed.matches(labels or {}):
        return [invalid(f"{path}.template.metadata.labels", GoRepr(string_map(labels)),
                        "`selector` does not match template `labels`")]
    return []


def _always_restart(spec: Mapping[str, Any], path: str, kind: str) -> list[FieldError]:
    pod = _dict(_dict(spec.get("template")).get("spec"))
    errs: list[FieldError] = []
    if pod.get("restartPolicy") and pod.get("restartPolicy") != "Always":
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", pod["restartPolicy"], ("Always",)))
    if pod.get("activeDeadlineSeconds") is not None:
        errs.append(forbidden(f"{path}.template.spec.activeDeadlineSeconds",
                              f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def _int_or_percent(value: Any, path: str) -> tuple[list[FieldError], int, bool]:
    """ValidatePositiveIntOrPercent; returns errors, the number, and whether it was a percentage."""
    if isinstance(value, str):
        if not re.fullmatch(r"[0-9]+%", value):
            return ([invalid(path, int_or_string_repr(value), "a valid percent string must be a numeric string "
                             "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
                             "'[0-9]+%')")], 0, True)
        return [], int(value[:-1]), True
    number = int(value or 0)
    if number < 0:
        return [invalid(path, number, _NONNEG)], number, False
    return [], number, False


def _rolling_values(rolling: Mapping[str, Any], path: str
                    ) -> tuple[list[FieldError], tuple[int, bool], tuple[int, bool]]:
    errs, unavailable, pct_u = _int_or_percent(rolling.get("maxUnavailable"), f"{path}.maxUnavailable")
    surge_errs, surge, pct_s = _int_or_percent(rolling.get("maxSurge"), f"{path}.maxSurge")
    errs.extend(surge_errs)
    return errs, (unavailable, pct_u), (surge, pct_s)


def _over_100(value: Any, number: int, percent: bool, path: str) -> list[FieldError]:
    if percent and number > 100:
        return [invalid(path, int_or_string_repr(value), "must not be greater than 100%")]
    return []


# --- apps/v1 ------------------------------------------------------------------------------------------

def validate_deployment(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = nonneg(spec.get("replicas"), "spec.replicas")
    sel_errs, parsed = _selector(spec, "spec", "deployment")
    errs.extend(sel_errs)
    if parsed is not None:
        errs.extend(_selector_matches(parsed, spec, "spec"))
        errs.extend(validate_pod_template(spec.get("template"), "spec.template"))
        errs.extend(_always_restart(spec, "spec", "ReplicaSet"))
    strategy = _dict(spec.get("strategy"))
    stype = strategy.get("type")
    if stype == "Recreate":
        if strategy.get("rollingUpdate") is not None:
            errs.append(forbidden("spec.strategy.rollingUpdate",
                                  "may not be specified when strategy `type` is 'Recreate'"))
    elif stype == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            errs.append(required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil"))
        else:
            r = _dict(rolling)
            path = "spec.strategy.rollingUpdate"
            ru_errs, (unavailable, pct_u), (surge, _pct_s) = _rolling_values(r, path)
            errs.extend(ru_errs)
            if unavailable == 0 and surge == 0:
                errs.append(invalid(f"{path}.maxUnavailable", int_or_string_repr(r.get("maxUnavailable")),
                                    "may not be 0 when `maxSurge` is 0"))
            errs.extend(_over_100(r.get("maxUnavailable"), unavailable, pct_u, f"{path}.maxUnavailable"))
    else:
        errs.append(not_supported("spec.strategy", _strategy_repr(strategy, ("MaxUnavailable", "MaxSurge")),
                                  ("Recreate", "RollingUpdate")))
    errs.extend(nonneg(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    errs.extend(nonneg(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        errs.extend(nonneg(deadline, "spec.progressDeadlineSeconds"))
        if isinstance(deadline, int) and deadline <= int(spec.get("minReadySeconds") or 0):
            errs.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errs


def _strategy_repr(strategy: Mapping[str, Any], fields: tuple[str, ...]) -> GoRepr:
    """An internal apps strategy struct (no JSON tags, so Go field names) as ``json.Marshal`` writes it."""
    rolling = strategy.get("rollingUpdate")
    rolling_repr: Any = None
    if isinstance(rolling, Mapping):
        rolling_repr = {name: int_or_string_repr(rolling.get(name[0].lower() + name[1:])) for name in fields}
    return GoRepr(go_json({"Type": str(strategy.get("type") or ""), "RollingUpdate": rolling_repr}, sort_keys=False))


def _sts_rolling_repr(rolling: Any) -> GoRepr:
    """An internal ``*apps.RollingUpdateStatefulSetStrategy`` as ``json.Marshal`` writes it."""
    if not isinstance(rolling, Mapping):
        return GoRepr("null")
    unavailable = rolling.get("maxUnavailable")
    return GoRepr(go_json({"Partition": int(rolling.get("partition") or 0),
                           "MaxUnavailable": None if unavailable is None else int_or_string_repr(unavailable)},
                          sort_keys=False))


def validate_replicaset(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = nonneg(spec.get("replicas"), "spec.replicas")
    errs.extend(nonneg(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    # Upstream names the deployment in this message for ReplicaSets too.
    sel_errs, parsed = _selector(spec, "spec", "deployment")
    errs.extend(sel_errs)
    if parsed is not None:
        errs.extend(_selector_matches(parsed, spec, "spec"))
        errs.extend(validate_pod_template(spec.get("template"), "spec.template"))
        errs.extend(_always_restart(spec, "spec", "ReplicaSet"))
    return errs


def validate_replication_controller(obj: Mapping[str, Any]) -> list[FieldError]:
    """ValidateReplicationControllerSpec: a selector map (never empty), its template labels, an Always template."""
    spec = _dict(obj.get("spec"))
    errs = nonneg(spec.get("minReadySeconds"), "spec.minReadySeconds")
    selector = spec.get("selector") if isinstance(spec.get("selector"), Mapping) else {}
    if not selector:
        errs.append(required("spec.selector"))
    errs.extend(validate_labels(selector, "spec.selector"))
    errs.extend(nonneg(spec.get("replicas"), "spec.replicas"))
    template = spec.get("template")
    if not isinstance(template, Mapping):
        errs.append(required("spec.template"))
        return errs
    labels = _template_labels(spec)
    if selector and any((labels or {}).get(k) != v for k, v in selector.items()):
        errs.append(invalid("spec.template.metadata.labels", GoRepr(string_map(labels)),
                            "`selector` does not match template `labels`"))
    errs.extend(validate_pod_template(template, "spec.template"))
    errs.extend(_always_restart(spec, "spec", "ReplicationController"))
    return errs


def validate_daemonset(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    sel_errs, parsed = _selector(spec, "spec", "daemonset", required_selector=False)
    errs = [e for e in sel_errs if "empty selector" not in e.detail]
    if parsed is not None and not parsed.matches(_template_labels(spec) or {}):
        errs.append(invalid("spec.template.metadata.labels", GoRepr(string_map(_template_labels(spec))),
                            "`selector` does not match template `labels`"))
    errs.extend(e for e in sel_errs if "empty selector" in e.detail)
    errs.extend(validate_pod_template(spec.get("template"), "spec.template"))
    errs.extend(_always_restart(spec, "spec", "DaemonSet"))
    errs.extend(nonneg(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    strategy = _dict(spec.get("updateStrategy"))
    stype = strategy.get("type")
    path = "spec.updateStrategy"
    if stype == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            errs.append(required(f"{path}.rollingUpdate"))
        else:
            r = _dict(rolling)
            rpath = f"{path}.rollingUpdate"
            ru_errs, (unavailable, pct_u), (surge, pct_s) = _rolling_values(r, rpath)
            errs.extend(ru_errs)
            errs.extend(_over_100(r.get("maxUnavailable"), unavailable, pct_u, f"{rpath}.maxUnavailable"))
            errs.extend(_over_100(r.get("maxSurge"), surge, pct_s, f"{rpath}.maxSurge"))
            if unavailable != 0 and surge != 0:
                errs.append(invalid(f"{rpath}.maxSurge", int_or_string_repr(r.get("maxSurge")),
                                    "may not be set when maxUnavailable is non-zero"))
            elif unavailable == 0 and surge == 0:
                errs.append(required(f"{rpath}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    elif stype != "OnDelete":
        errs.append(not_supported(path, _strategy_repr(strategy, ("MaxUnavailable", "MaxSurge")),
                                  ("RollingUpdate", "OnDelete")))
    errs.extend(nonneg(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    return errs


def validate_statefulset(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    policy = spec.get("podManagementPolicy")
    if not policy:
        errs.append(required("spec.podManagementPolicy"))
    elif policy not in ("OrderedReady", "Parallel"):
        errs.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = _dict(spec.get("updateStrategy"))
    stype = strategy.get("type")
    if not stype:
        errs.append(required("spec.updateStrategy"))
    elif stype == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            errs.append(invalid("spec.updateStrategy.rollingUpdate", _sts_rolling_repr(strategy.get("rollingUpdate")),
                                "only allowed for updateStrategy 'RollingUpdate'"))
    elif stype == "RollingUpdate":
        errs.extend(nonneg(_dict(strategy.get("rollingUpdate")).get("partition"),
                           "spec.updateStrategy.rollingUpdate.partition"))
    else:
        shown = {"Type": str(stype), "RollingUpdate": _sts_rolling_repr(strategy.get("rollingUpdate"))}
        errs.append(invalid("spec.updateStrategy", GoRepr(go_json(shown, sort_keys=False)),
                            "must be 'RollingUpdate' or 'OnDelete'"))
    errs.extend(nonneg(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    errs.extend(nonneg(spec.get("replicas"), "spec.replicas"))
    errs.extend(nonneg(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    sel_errs, parsed = _selector(spec, "spec", "statefulset")
    errs.extend(sel_errs)
    if parsed is not None:
        errs.extend(_selector_matches(parsed, spec, "spec"))
        errs.extend(validate_pod_template(spec.get("template"), "spec.template"))
    errs.extend(_always_restart(spec, "spec", "StatefulSet"))
    return errs


_STS_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy", "minReadySeconds")


def validate_apps_update(kind: str, new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    errs: list[FieldError] = []
    if new_spec.get("selector") != old_spec.get("selector"):
        errs.append(invalid("spec.selector", label_selector_repr(new_spec.get("selector")), "field is immutable"))
    if kind == "StatefulSet":
        rest_new = {k: v for k, v in new_spec.items() if k not in _STS_MUTABLE}
        rest_old = {k: v for k, v in old_spec.items() if k not in _STS_MUTABLE}
        if rest_new != rest_old:
            errs.append(forbidden("spec", "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                                  "'template', 'updateStrategy', 'revisionHistoryLimit', "
                                  "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
    return errs


# --- batch/v1 -----------------------------------------------------------------------------------------

def _job_spec(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished",
                "backoffLimitPerIndex", "maxFailedIndexes"):
        errs.extend(nonneg(spec.get(key), f"{path}.{key}"))
    mode = spec.get("completionMode")
    if spec.get("backoffLimitPerIndex") is not None and mode != "Indexed":
        errs.append(invalid(f"{path}.backoffLimitPerIndex", spec["backoffLimitPerIndex"],
                            "requires indexed completion mode"))
    if mode is not None:
        if mode not in ("NonIndexed", "Indexed"):
            errs.append(not_supported(f"{path}.completionMode", mode, ("NonIndexed", "Indexed")))
        if mode == "Indexed":
            if spec.get("completions") is None:
                errs.append(required(f"{path}.completions", "when completion mode is Indexed"))
            parallelism = spec.get("parallelism")
            if isinstance(parallelism, int) and parallelism > MAX_PARALLELISM_INDEXED:
                errs.append(invalid(f"{path}.parallelism", parallelism, f"must be less than or equal to "
                                    f"{MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if replacement not in ("TerminatingOrFailed", "Failed"):
            errs.append(not_supported(f"{path}.podReplacementPolicy", replacement, ("TerminatingOrFailed", "Failed")))
        elif spec.get("podFailurePolicy") is not None and replacement != "Failed":
            errs.append(not_supported(f"{path}.podReplacementPolicy", replacement, ("Failed",)))
    errs.extend(validate_pod_template(spec.get("template"), f"{path}.template"))
    restart = _dict(_dict(spec.get("template")).get("spec")).get("restartPolicy")
    rpath = f"{path}.template.spec.restartPolicy"
    if restart in ("Always", "", None):
        errs.append(required(rpath, 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        errs.append(not_supported(rpath, restart, ("OnFailure", "Never")))
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        errs.append(invalid(rpath, restart, 'only "Never" is supported when podFailurePolicy is specified'))
    return errs


def _has_label(labels: Mapping[str, Any], key: str, want: str) -> list[FieldError]:
    path = f"spec.template.metadata.labels[{key}]"
    if key not in labels:
        return [required(path, f"must be '{want}'")]
    if labels[key] != want:
        return [invalid(path, GoRepr(string_map(dict(labels))), f"must be '{want}'")]
    return []


def validate_job(obj: Mapping[str, Any]) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    meta = _dict(obj.get("metadata"))
    errs: list[FieldError] = []
    labels = _template_labels(spec)
    if spec.get("manualSelector") is not True and labels is not None:
        uid = str(meta.get("uid") or "")
        if not uid:
            errs.append(required("metadata.uid"))
        else:
            labels = _dict(labels)
            name = str(meta.get("name") or "")
            for key, want in (("controller-uid", uid), ("job-name", name), ("batch.kubernetes.io/controller-uid", uid),
                              ("batch.kubernetes.io/job-name", name)):
                errs.extend(_has_label(labels, key, want))
            try:
                generated = from_label_selector(spec.get("selector"))
            except InvalidSelector:
                generated = None
            if generated is None or not generated.matches({"batch.kubernetes.io/controller-uid": uid}):
                errs.append(invalid("spec.selector", label_selector_repr(spec.get("selector")),
                                    "`selector` not auto-generated"))
    errs.extend(_job_spec(spec, "spec"))
    sel_errs, parsed = _selector(spec, "spec", "job")
    errs.extend(e for e in sel_errs if "empty selector" not in e.detail)
    if parsed is not None and not parsed.matches(_template_labels(spec) or {}):
        errs.append(invalid("spec.template.metadata.labels", GoRepr(string_map(_template_labels(spec))),
                            "`selector` does not match template `labels`"))
    return errs


_JOB_IMMUTABLE = ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy",
                  "successPolicy")


def validate_job_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    errs: list[FieldError] = []
    for key in _JOB_IMMUTABLE:
        if new_spec.get(key) != old_spec.get(key):
            value = label_selector_repr(new_spec.get(key)) if key == "selector" else new_spec.get(key)
            errs.append(invalid(f"spec.{key}", value, "field is immutable"))
    elastic = new_spec.get("completionMode") == "Indexed" and new_spec.get("completions") == new_spec.get(
        "parallelism") and old_spec.get("completions") == old_spec.get("parallelism")
    if new_spec.get("completions") != old_spec.get("completions") and not elastic:
        errs.append(invalid("spec.completions", new_spec.get("completions"), "field is immutable"))
    new_t, old_t = _dict(new_spec.get("template")), _dict(old_spec.get("template"))
    suspended_unstarted = old_spec.get("suspend") is True and not _dict(old.get("status")).get("startTime")
    if suspended_unstarted:
        # Scheduling directives of a Job that never ran may change (kueue-style admission).
        new_t, old_t = _without_scheduling(new_t), _without_scheduling(old_t)
    if new_t != old_t:
        errs.append(invalid("spec.template", _TEMPLATE_REPR, "field is immutable"))
    return errs


def _without_scheduling(template: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in _dict(template.get("metadata")).items() if k not in ("labels", "annotations")}
    spec = {k: v for k, v in _dict(template.get("spec")).items()
            if k not in ("nodeSelector", "tolerations", "schedulingGates")}
    affinity = {k: v for k, v in _dict(spec.get("affinity")).items() if k != "nodeAffinity"}
    spec.pop("affinity", None)
    if affinity:
        spec["affinity"] = affinity
    return {**template, "metadata": meta, "spec": spec}


# --- CronJob ------------------------------------------------------------------------------------------

_TZ_PART = re.compile(r"^[A-Za-z\.\-_0-9+]{1,14}$")


def schedule_error(schedule: str) -> str | None:
    """Why robfig/cron's ParseStandard rejects ``schedule`` (None when it parses), with robfig's message,
    as the real API server's CronJob validation reports it."""
    try:
        parse_standard(schedule)
    except (ScheduleError, UnknownTimeZone) as exc:
        return str(exc)
    return None


def validate_time_zone(zone: Any, path: str) -> list[FieldError]:
    if zone is None:
        return []
    name = str(zone)
    if not name:
        return [invalid(path, name, "timeZone must be nil or non-empty string")]
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.match(part):
            return [invalid(path, name, f"unknown time zone {name}")]
    if name.lower() == "local":
        return [invalid(path, name, "timeZone must be an explicit time zone as defined in "
                        "https://www.iana.org/time-zones")]
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return [invalid(path, name, f"unknown time zone {name}")]
    return []


def validate_cronjob(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    if old is None and len(name) > 52:
        errs.append(invalid("metadata.name", name, "must be no more than 52 characters"))
    schedule = str(spec.get("schedule") or "")
    if not schedule:
        errs.append(required("spec.schedule"))
    else:
        why = schedule_error(schedule)
        if why:
            errs.append(invalid("spec.schedule", schedule, why))
        if "TZ" in schedule:
            errs.append(invalid("spec.schedule", schedule,
                                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
    errs.extend(nonneg(spec.get("startingDeadlineSeconds"), "spec.startingDeadlineSeconds"))
    if old is None or _dict(old.get("spec")).get("timeZone") != spec.get("timeZone"):
        errs.extend(validate_time_zone(spec.get("timeZone"), "spec.timeZone"))
    policy = spec.get("concurrencyPolicy")
    if not policy:
        errs.append(required("spec.concurrencyPolicy"))
    elif policy not in ("Allow", "Forbid", "Replace"):
        errs.append(not_supported("spec.concurrencyPolicy", policy, ("Allow", "Forbid", "Replace")))
    job_spec = _dict(_dict(spec.get("jobTemplate")).get("spec"))
    errs.extend(_job_spec(job_spec, "spec.jobTemplate.spec"))
    if job_spec.get("selector") is not None:
        errs.append(invalid("spec.jobTemplate.spec.selector", label_selector_repr(job_spec["selector"]),
                            "`selector` will be auto-generated"))
    if job_spec.get("manualSelector") is True:
        errs.append(not_supported("spec.jobTemplate.spec.manualSelector", True, ("nil", "false")))
    errs.extend(nonneg(spec.get("successfulJobsHistoryLimit"), "spec.successfulJobsHistoryLimit"))
    errs.extend(nonneg(spec.get("failedJobsHistoryLimit"), "spec.failedJobsHistoryLimit"))
    return errs
