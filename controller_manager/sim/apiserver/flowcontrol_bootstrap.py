"""The API Priority and Fairness configuration kube-apiserver creates at start-up and then keeps: its
``priority-and-fairness-config-producer`` post-start hook (``pkg/registry/flowcontrol/rest`` and
``pkg/registry/flowcontrol/ensurer``), with the objects of ``k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap``.

Guarantees:
- :func:`install` stores the mandatory (``exempt``, ``catch-all``) and suggested PriorityLevelConfigurations and
  FlowSchemas when a server is made, each annotated ``apf.kubernetes.io/autoupdate-spec: "true"``.
- :func:`ensure` is one pass of the producer, run every :data:`ENSURE_INTERVAL` seconds on the server's clock
  by :func:`run_producer` (the HTTP app starts it): the suggested levels, the suggested schemas, the mandatory
  levels, the mandatory schemas, then the removal of unwanted objects. A missing bootstrap object is created
  again (mandatory or suggested alike). A mandatory object's spec is put back whenever it differs from the
  bootstrap one (for the ``exempt`` level, ``nominalConcurrencyShares`` and ``lendablePercent`` are the
  operator's), and its annotation set to "true". A suggested object's spec is put back only while its annotation
  says true (Go's ``strconv.ParseBool``); without a readable annotation, only while its ``generation`` is 1 (no
  one changed it), and the annotation is then written to say which. An object that is not a bootstrap one and
  is annotated true is deleted. Nothing is written when everything is as it should be.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import format_time
from controller_manager.api.resources import FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS, Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.flowcontrol import ALL, MAX_PRECEDENCE, dangling_condition

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

log = structlog.get_logger("kube-sim.apf")

AUTO_UPDATE = "apf.kubernetes.io/autoupdate-spec"
# The field manager of the producer's own creates and updates (the ensurer's fieldManager).
PRODUCER = "api-priority-and-fairness-config-producer-v1"
# The producer's period once the first pass succeeded (wait.PollImmediateUntil(time.Minute, ...)).
ENSURE_INTERVAL = 60.0
MANDATORY_LEVELS = frozenset({"exempt", "catch-all"})
MANDATORY_SCHEMAS = frozenset({"exempt", "catch-all"})
# What an operator may set on the mandatory exempt level (ExemptPriorityLevelConfiguration).
_EXEMPT_TUNABLES = ("nominalConcurrencyShares", "lendablePercent")


def _meta(name: str) -> Obj:
    return {"name": name, "annotations": {AUTO_UPDATE: "true"}}


def _exempt_level() -> Obj:
    return {"metadata": _meta("exempt"),
            "spec": {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}}


def _limited_level(name: str, shares: int, lendable: int, queuing: tuple[int, int, int] | None) -> Obj:
    response: Obj = {"type": "Reject"}
    if queuing is not None:
        queues, hand_size, queue_length_limit = queuing
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand_size,
                                                 "queueLengthLimit": queue_length_limit}}
    return {"metadata": _meta(name), "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": shares, "lendablePercent": lendable, "limitResponse": response}}}


def _groups(*names: str) -> list[Obj]:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


def _users(*names: str) -> list[Obj]:
    return [{"kind": "User", "user": {"name": n}} for n in names]


_KUBE_SYSTEM_SERVICE_ACCOUNTS = [{"kind": "ServiceAccount", "serviceAccount": {"name": ALL,
                                                                                "namespace": "kube-system"}}]
_EVERYTHING = {"resourceRules": [{"verbs": [ALL], "apiGroups": [ALL], "resources": [ALL], "clusterScope": True,
                                  "namespaces": [ALL]}],
               "nonResourceRules": [{"verbs": [ALL], "nonResourceURLs": [ALL]}]}
_EVERYONE = _groups("system:unauthenticated", "system:authenticated")


def _schema(name: str, level: str, precedence: int, distinguisher: str, subjects: list[Obj], rules: Obj) -> Obj:
    spec: Obj = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = [{"subjects": subjects, **rules}]
    return {"metadata": _meta(name), "spec": spec}


def priority_levels() -> list[Obj]:
    """The mandatory levels, then the suggested ones (upstream's order)."""
    return [
        _limited_level("catch-all", 5, 0, None), _exempt_level(),
        _limited_level("system", 30, 33, (64, 6, 50)), _limited_level("node-high", 40, 25, (64, 6, 50)),
        _limited_level("leader-election", 10, 0, (16, 4, 50)), _limited_level("workload-high", 40, 50, (128, 6, 50)),
        _limited_level("workload-low", 100, 90, (128, 6, 50)),
        _limited_level("global-default", 20, 50, (128, 6, 50)),
    ]


def flow_schemas() -> list[Obj]:
    """The mandatory schemas, then the suggested ones (upstream's order)."""
    leases = {"verbs": ["get", "create", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
              "namespaces": [ALL]}
    return [
        _schema("exempt", "exempt", 1, "", _groups("system:masters"), _EVERYTHING),
        _schema("catch-all", "catch-all", MAX_PRECEDENCE, "ByUser", _EVERYONE, _EVERYTHING),
        _schema("system-nodes", "system", 500, "ByUser", _groups("system:nodes"), _EVERYTHING),
        _schema("system-node-high", "node-high", 400, "ByUser", _groups("system:nodes"), {"resourceRules": [
            {"verbs": [ALL], "apiGroups": [""], "resources": ["nodes", "nodes/status"], "clusterScope": True,
             "namespaces": [ALL]},
            {"verbs": [ALL], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "namespaces": [ALL]}]}),
        _schema("probes", "exempt", 2, "", _EVERYONE, {"nonResourceRules": [
            {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
        _schema("system-leader-election", "leader-election", 100, "ByUser",
                _users("system:kube-controller-manager", "system:kube-scheduler") + _KUBE_SYSTEM_SERVICE_ACCOUNTS,
                {"resourceRules": [leases]}),
        _schema("kube-controller-manager", "workload-high", 800, "ByNamespace",
                _users("system:kube-controller-manager"), _EVERYTHING),
        _schema("kube-scheduler", "workload-high", 800, "ByNamespace", _users("system:kube-scheduler"), _EVERYTHING),
        _schema("kube-system-service-accounts", "workload-high", 900, "ByNamespace", _KUBE_SYSTEM_SERVICE_ACCOUNTS,
                _EVERYTHING),
        _schema("service-accounts", "workload-low", 9000, "ByUser", _groups("system:serviceaccounts"), _EVERYTHING),
        _schema("global-default", "global-default", 9900, "ByUser", _EVERYONE, _EVERYTHING),
    ]


_PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
_PLACEHOLDER_TIME = "1970-01-01T00:00:00Z"


@functools.cache
def _stored_forms() -> tuple[tuple[Obj, ...], tuple[Obj, ...]]:
    """The levels and schemas as a create stores them (defaulted, Go's JSON form, generation 1), built once per
    process with placeholder uid and times; the FlowSchemas carry their (not dangling) condition."""
    from controller_manager.sim.apiserver import codec, defaults

    def stored(res: Resource, obj: Obj, status: Obj) -> Obj:
        meta = {"name": obj["metadata"]["name"], "uid": _PLACEHOLDER_UID, "generation": 1,
                "creationTimestamp": _PLACEHOLDER_TIME, "annotations": obj["metadata"]["annotations"]}
        typed = defaults.apply_defaults(res, {"apiVersion": res.api_version, "kind": res.kind, **obj,
                                              "metadata": meta, "status": status})
        return codec.normalize(res, typed)

    levels = tuple(stored(PRIORITYLEVELCONFIGURATIONS, pl, {}) for pl in priority_levels())
    schemas = tuple(stored(FLOWSCHEMAS, fs, {"conditions": [
        {**dangling_condition(fs["spec"]["priorityLevelConfiguration"]["name"], True),
         "lastTransitionTime": _PLACEHOLDER_TIME}]}) for fs in flow_schemas())
    return levels, schemas


def _fresh(template: Obj, uid: str, now: str) -> Obj:
    meta = {**template["metadata"], "uid": uid, "creationTimestamp": now}
    out = {**template, "metadata": meta}
    conditions = template["status"].get("conditions")
    if conditions:
        out["status"] = {**template["status"],
                         "conditions": [{**c, "lastTransitionTime": now} for c in conditions]}
    return out


def install(api: ApiServer) -> None:
    """The producer's first pass on a new server, with the conditions the config controller then writes (the
    levels first, so that no schema is ever seen dangling). Every new server writes these, so they are stored in
    the form a create would give them, built once (tests hold the two equal)."""
    now = format_time(api.clock.now())
    levels, schemas = _stored_forms()
    for level in levels:
        api.store_prepared(PRIORITYLEVELCONFIGURATIONS, _fresh(level, str(uuid.uuid4()), now))
    for schema in schemas:
        api.store_prepared(FLOWSCHEMAS, _fresh(schema, str(uuid.uuid4()), now))


# --- keeping it -------------------------------------------------------------------------------------------------


def _parse_bool(value: Any) -> bool | None:
    """Go's ``strconv.ParseBool``; None for anything else (a missing annotation included)."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _spec_equalish(res: Resource, bootstrap: Obj, current: Obj) -> bool:
    """Whether ``current``'s spec is the (defaulted) bootstrap one; the exempt level's two tunables are the
    operator's to set."""
    expected, actual = bootstrap["spec"], current.get("spec")
    if res is PRIORITYLEVELCONFIGURATIONS and bootstrap["metadata"]["name"] == "exempt":
        exempt = actual.get("exempt") if isinstance(actual, dict) else None
        if not isinstance(exempt, dict):
            return False
        fixed = {k: v for k, v in expected["exempt"].items() if k not in _EXEMPT_TUNABLES}
        expected = {**expected, "exempt": {**fixed, **{k: exempt[k] for k in _EXEMPT_TUNABLES if k in exempt}}}
    return bool(expected == actual)


def _revised(res: Resource, current: Obj, bootstrap: Obj, *, mandatory: bool) -> Obj | None:
    """The strategy's ReviseIfNeeded: the object to write back, or None when ``current`` is as it should be."""
    annotations = current["metadata"].get("annotations") or {}
    written = _parse_bool(annotations.get(AUTO_UPDATE))
    auto_update = mandatory or (written if written is not None else current["metadata"].get("generation") == 1)
    update_annotation = written != auto_update
    spec_changed = auto_update and not _spec_equalish(res, bootstrap, current)
    if not (update_annotation or spec_changed):
        return None
    revised = {**current, "metadata": {**current["metadata"]}}
    if spec_changed:
        revised["spec"] = bootstrap["spec"]
    if update_annotation:
        revised["metadata"]["annotations"] = {**annotations, AUTO_UPDATE: "true" if auto_update else "false"}
    return revised


def _ensure_one(api: ApiServer, res: Resource, bootstrap: Obj, *, mandatory: bool) -> None:
    name = bootstrap["metadata"]["name"]
    stored = api.store(res).get(name)
    if stored is None:
        meta = {"name": name, "annotations": bootstrap["metadata"]["annotations"]}
        api.create(res, {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta, "spec": bootstrap["spec"]},
                   field_manager=PRODUCER)
        log.info("created APF bootstrap object", kind=res.kind, name=name,
                 type="mandatory" if mandatory else "suggested")
        return
    revised = _revised(res, stored.obj, bootstrap, mandatory=mandatory)
    if revised is not None:
        api.update(res, revised, field_manager=PRODUCER)
        log.info("updated APF bootstrap object", kind=res.kind, name=name,
                 type="mandatory" if mandatory else "suggested")


def _remove_unwanted(api: ApiServer, res: Resource, wanted: frozenset[str]) -> None:
    """RemoveUnwantedObjects: objects annotated true that the bootstrap configuration no longer has."""
    for stored in list(api.store(res).iter_from(None)):
        meta = stored.obj["metadata"]
        if meta["name"] in wanted or _parse_bool((meta.get("annotations") or {}).get(AUTO_UPDATE)) is not True:
            continue
        api.delete(res, None, meta["name"])
        log.info("deleted unwanted APF object", kind=res.kind, name=meta["name"])


def ensure(api: ApiServer) -> None:
    """One pass of the config producer (see the module docstring)."""
    levels, schemas = _stored_forms()
    suggested_levels = [lv for lv in levels if lv["metadata"]["name"] not in MANDATORY_LEVELS]
    suggested_schemas = [fs for fs in schemas if fs["metadata"]["name"] not in MANDATORY_SCHEMAS]
    for res, objs, mandatory in (
            (PRIORITYLEVELCONFIGURATIONS, suggested_levels, False), (FLOWSCHEMAS, suggested_schemas, False),
            (PRIORITYLEVELCONFIGURATIONS, [lv for lv in levels if lv not in suggested_levels], True),
            (FLOWSCHEMAS, [fs for fs in schemas if fs not in suggested_schemas], True)):
        for obj in objs:
            _ensure_one(api, res, obj, mandatory=mandatory)
    _remove_unwanted(api, FLOWSCHEMAS, frozenset(fs["metadata"]["name"] for fs in schemas))
    _remove_unwanted(api, PRIORITYLEVELCONFIGURATIONS, frozenset(lv["metadata"]["name"] for lv in levels))


async def run_producer(api: ApiServer, interval: float = ENSURE_INTERVAL) -> None:
    """The producer's periodic passes until cancelled (the first one is :func:`install`'s). A failed pass is
    logged and retried at the next period, as upstream's."""
    while True:
        await api.clock.sleep(interval)
        try:
            ensure(api)
        except errors.StatusError as e:
            log.warning("APF bootstrap ensurer ran into error, will retry later", error=str(e.status.get("message")))
