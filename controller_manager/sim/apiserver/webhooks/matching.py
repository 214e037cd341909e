"""Which admission webhooks a request calls (``k8s.io/apiserver/pkg/admission/plugin/webhook/predicates`` and
``generic/webhook.go``'s ShouldCallHook).

Guarantees:
- Webhooks are taken configuration by configuration, in name order, each configuration's webhooks in their
  listed order (upstream's manager sorts them so the mutating ones run in a deterministic order).
- A rule matches on scope (``Namespaced``: a namespaced object, never a Namespace; ``Cluster``: a cluster-scoped
  object or a Namespace), operation (or ``*``), apiGroup, apiVersion (or ``*``) and resource, where
  ``pods/status``, ``pods/*``, ``*/status`` and ``*`` name subresources as upstream splits them.
- ``matchPolicy: Equivalent`` (the default) also matches a rule written for another version or group serving the
  same stored objects (kube-sim's: autoscaling v1/v2 HorizontalPodAutoscalers, core and events.k8s.io Events);
  the webhook is then sent the object converted to the matched version.
- ``namespaceSelector`` tests the labels of the request's namespace (for a Namespace created or updated, its own
  labels); cluster-scoped objects always pass. ``objectSelector`` passes when the new or the old object's labels
  match. An empty selector matches everything.
- The webhook configurations and admission policies themselves are never sent to webhooks.
- ``matchConditions`` (CEL) are not evaluated: kube-sim has no CEL library yet, so a webhook whose rules and
  selectors match is called whatever its conditions say.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller_manager.api import selectors
from controller_manager.api.resources import (
    EVENTS,
    EVENTS_V1,
    HORIZONTALPODAUTOSCALERS,
    HORIZONTALPODAUTOSCALERS_V1,
    MUTATINGWEBHOOKCONFIGURATIONS,
    NAMESPACES,
    VALIDATINGWEBHOOKCONFIGURATIONS,
    Resource,
)
from controller_manager.sim.apiserver import codec, errors, events, hpa

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

ADMISSION_GROUP = "admissionregistration.k8s.io"
_EXEMPT_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                           "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"})
# Resources served over one store, in the order upstream's equivalence registry lists them.
_EQUIVALENTS: tuple[tuple[Resource, ...], ...] = (
    (HORIZONTALPODAUTOSCALERS_V1, HORIZONTALPODAUTOSCALERS),
    (EVENTS, EVENTS_V1),
)


def _gvr(res: Resource) -> tuple[str, str, str]:
    return res.group, res.version, res.plural


def equivalents(res: Resource) -> tuple[Resource, ...]:
    for family in _EQUIVALENTS:
        if any(_gvr(r) == _gvr(res) for r in family):
            return family
    return (res,)


def convert(obj: Obj, source: Resource, target: Resource) -> Obj:
    """``obj`` (as ``source`` serves it) as ``target`` serves it; both must be equivalents."""
    if _gvr(source) == _gvr(target):
        return obj
    if source.kind == "HorizontalPodAutoscaler":
        if target.version == HORIZONTALPODAUTOSCALERS.version:
            return hpa.to_v2(obj)
        return codec.normalize(target, hpa.to_v1(obj))
    if source.kind == "Event":
        return events.to_v1(obj) if target.group == EVENTS_V1.group else events.to_core(obj)
    raise AssertionError(f"no conversion from {source.api_version} to {target.api_version}")


def is_exempt(res: Resource) -> bool:
    return res.group == ADMISSION_GROUP and res.kind in _EXEMPT_KINDS


@dataclass(frozen=True)
class Webhook:
    configuration: str
    spec: Mapping[str, Any]  # one entry of the configuration's ``webhooks`` (defaults applied on write)
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def failure_policy(self) -> str:
        return str(self.spec.get("failurePolicy") or "Fail")

    @property
    def reinvoke_if_needed(self) -> bool:
        return self.spec.get("reinvocationPolicy") == "IfNeeded"

    @property
    def uid(self) -> str:
        return f"{self.configuration}/{self.name}"


def webhooks(api: ApiServer, *, mutating: bool) -> list[Webhook]:
    res = MUTATINGWEBHOOKCONFIGURATIONS if mutating else VALIDATINGWEBHOOKCONFIGURATIONS
    if api.lookup(res.group, res.version, res.plural) is None:  # a server built without admissionregistration
        return []
    if not api.store(res).objects:  # the usual case, checked on every write
        return []
    configs = sorted((s.obj for s in api.store(res).iter_from(None)), key=lambda o: str(o["metadata"]["name"]))
    return [Webhook(str(c["metadata"]["name"]), hook, mutating)
            for c in configs for hook in c.get("webhooks") or () if isinstance(hook, Mapping)]


@dataclass(frozen=True)
class Request:
    """What a rule is matched against (admission.Attributes less the objects)."""
    res: Resource
    subresource: str
    namespace: str
    operation: str


def _exact_or_wildcard(items: Any, value: str) -> bool:
    return any(item in ("*", value) for item in items or ())


def _rule_matches(rule: Mapping[str, Any], req: Request, res: Resource, *, any_operation: bool = False) -> bool:
    scope = rule.get("scope") or "*"
    is_namespace = _gvr(res) == _gvr(NAMESPACES)
    if scope == "Namespaced" and (is_namespace or not req.namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not req.namespace):
        return False
    if scope not in ("*", "Namespaced", "Cluster"):
        return False
    if not any_operation and not _exact_or_wildcard(rule.get("operations"), req.operation):
        return False
    if not (_exact_or_wildcard(rule.get("apiGroups"), res.group)
            and _exact_or_wildcard(rule.get("apiVersions"), res.version)):
        return False
    for entry in rule.get("resources") or ():
        name, _, sub = str(entry).partition("/")
        if name in ("*", res.plural) and sub in ("*", req.subresource):
            return True
    return False


def matched_resource(hook: Webhook, req: Request, *, any_operation: bool = False) -> Resource | None:
    """The resource (the request's, or an equivalent one) under which a rule of ``hook`` matches ``req``."""
    rules = [r for r in hook.spec.get("rules") or () if isinstance(r, Mapping)]
    for rule in rules:
        if _rule_matches(rule, req, req.res, any_operation=any_operation):
            return req.res
    if hook.spec.get("matchPolicy", "Equivalent") != "Equivalent":
        return None
    for rule in rules:  # earlier rules first
        for other in equivalents(req.res):
            if _gvr(other) != _gvr(req.res) and _rule_matches(rule, req, other, any_operation=any_operation):
                return other
    return None


def may_apply(api: ApiServer, res: Resource, subresource: str, namespace: str, *, mutating: bool) -> bool:
    """Whether any webhook's rules could match a create or update of ``res`` (objects not looked at yet)."""
    if is_exempt(res) or not webhooks(api, mutating=mutating):
        return False
    for operation in ("CREATE", "UPDATE"):
        req = Request(res, subresource, namespace, operation)
        if any(matched_resource(h, req) is not None for h in webhooks(api, mutating=mutating)):
            return True
    return False


def _labels(obj: Obj | None) -> Mapping[str, str] | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _selector(value: Any) -> selectors.Selector:
    try:
        return selectors.from_label_selector(value if isinstance(value, Mapping) else {})
    except selectors.InvalidSelector as e:
        raise errors.internal_error(str(e)) from None


def namespace_matches(api: ApiServer, hook: Webhook, req: Request, obj: Obj | None) -> bool:
    is_namespace = _gvr(req.res) == _gvr(NAMESPACES) or (req.res.group == "" and req.res.plural == "namespaces")
    if not req.namespace and not is_namespace:
        return True
    selector = _selector(hook.spec.get("namespaceSelector"))
    if selector.is_empty():
        return True
    if is_namespace and not req.subresource and req.operation in ("CREATE", "UPDATE"):
        labels = _labels(obj) or {}
    else:
        name = req.namespace or (str((obj or {}).get("metadata", {}).get("name") or "") if is_namespace else "")
        stored = api.store(NAMESPACES).get(name)
        if stored is None:
            raise errors.not_found("", "namespaces", name)
        labels = stored.labels
    return selector.matches(labels)


def object_matches(hook: Webhook, obj: Obj | None, old: Obj | None) -> bool:
    selector = _selector(hook.spec.get("objectSelector"))
    if selector.is_empty():
        return True
    return any(labels is not None and selector.matches(labels) for labels in (_labels(obj), _labels(old)))


def iter_invocations(api: ApiServer, hooks: list[Webhook], req: Request, obj: Obj | None,
                     old: Obj | None) -> Iterator[tuple[Webhook, Resource]]:
    """Each webhook to call for ``req`` (``obj``/``old`` in the request's version) and the resource it gets."""
    for hook in hooks:
        # Upstream checks selectors first but reports their errors only for webhooks whose rules match.
        target = matched_resource(hook, req)
        if target is None:
            continue
        if not namespace_matches(api, hook, req, obj) or not object_matches(hook, obj, old):
            continue
        yield hook, target
