"""Mutating and validating admission webhooks around a write (``mutating/dispatcher.go``,
``validating/dispatcher.go``), and how kube-sim fits their asynchronous calls around its synchronous server.

Where they run, as upstream: mutating webhooks after the built-in mutating admission (defaults, LimitRanger,
ServiceAccount, Priority...) and before the registry prepares the object (no uid, creationTimestamp or generated
name yet on a create); validating webhooks after the registry's validation and NamespaceLifecycle, before
ResourceQuota and storage. ``ApiServer`` is synchronous, so a write with webhooks that may apply runs in passes,
each through the very same server code (:attr:`ApiServer.webhook_point` is called at those two places):

1. a dry run stopped at the mutating point: the object the mutating webhooks are sent;
2. a dry run with their result put in at that point, stopped at the validating point: the object the validating
   webhooks are sent;
3. the write itself, with pass 2's object at the mutating point put in again (its uid, creationTimestamp and
   generated name included), so what the validating webhooks saw is what is stored.

A pass is skipped when no webhook's rules can match. If the object an update replaces changed between the
passes (another write came between them), the passes start again (three tries, then 409 Conflict); a create
keeps what pass 1 saw (the random parts the built-in plugins added included).
Deviations from upstream, all from running in passes: the built-in mutating plugins are not re-run after the
webhooks (upstream re-runs them when a webhook changed the object); fields the registry fills from the
cluster's state on a create (a Service's cluster IP) may differ between what the validating webhooks saw and
what is stored. Subresources with a kind of their own (pods/eviction, pods/binding, ``/scale``) are sent that
object (a Scale update with the current Scale as ``oldObject``; a /scale patch is worked out first), which the
mutating ones may change, in one pass before the subresource acts: the validating webhooks see it before the
registry checks it. CONNECT is never matched (kube-sim serves no connect subresource). Validating webhooks are
called in parallel, as upstream calls them; of several refusals the first webhook's in order is answered (upstream
answers the first to arrive).

Reinvocation: a webhook with ``reinvocationPolicy: IfNeeded`` is called once more, after all the others, when a
webhook called after it changed the object.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import codec, defaults, errors
from controller_manager.sim.apiserver import patch as patching
from controller_manager.sim.apiserver.webhooks import calling, matching
from controller_manager.sim.apiserver.webhooks.matching import Request, Webhook

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
_T = TypeVar("_T")

_TRIES = 3
_REGISTRY_FIELDS = ("uid", "creationTimestamp")  # filled after mutating admission on a create


@dataclass
class Attributes:
    """What the HTTP layer knows of a write: the resource as addressed, the user, the options."""
    res: Resource
    subresource: str
    namespace: str  # "" for cluster-scoped objects
    name: str  # the URL's name ("" for a POST create: taken from the object)
    user_info: Obj
    dry_run: bool
    field_manager: str = ""
    # The kind sent when it is not the resource's (a subresource's own kind: policy/v1 Eviction, v1 Binding).
    kind: tuple[str, str, str] | None = None
    warnings: list[str] = field(default_factory=list)  # what the webhooks said, for the Warning headers

    def decoded_as(self, target: Resource) -> Resource:
        """What the objects sent for ``target`` are decoded as."""
        if self.kind is None:
            return target
        group, version, kind = self.kind
        return Resource(group, version, target.plural, kind, target.namespaced)

    def options(self, operation: str) -> Obj:
        kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]
        out: Obj = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if self.dry_run:
            out["dryRun"] = ["All"]
        if self.field_manager and operation != "DELETE":
            out["fieldManager"] = self.field_manager
        return out


# --- calling the webhooks --------------------------------------------------------------------------------

def _gvk(res: Resource, attrs: Attributes) -> Obj:
    kind = attrs.decoded_as(res)
    return {"group": kind.group, "version": kind.version, "kind": kind.kind}


def _gvr(res: Resource) -> Obj:
    return {"group": res.group, "version": res.version, "resource": res.plural}


def _name_of(attrs: Attributes, obj: Obj | None, old: Obj | None) -> str:
    for o in (obj, old):
        if isinstance(o, Mapping) and isinstance(o.get("metadata"), Mapping) and o["metadata"].get("name"):
            return str(o["metadata"]["name"])
    return attrs.name


def _review(attrs: Attributes, operation: str, target: Resource, obj: Obj | None, old: Obj | None) -> calling.Review:
    return calling.Review(
        kind=_gvk(target, attrs), resource=_gvr(target), sub_resource=attrs.subresource,
        request_kind=_gvk(attrs.res, attrs), request_resource=_gvr(attrs.res), request_sub_resource=attrs.subresource,
        name=_name_of(attrs, obj, old), namespace=attrs.namespace, operation=operation, user_info=attrs.user_info,
        obj=matching.convert(obj, attrs.res, target) if obj is not None else None,
        old=matching.convert(old, attrs.res, target) if old is not None else None,
        dry_run=attrs.dry_run, options=attrs.options(operation))


def _check_dry_run(attrs: Attributes, hook: Webhook) -> None:
    if attrs.dry_run and hook.spec.get("sideEffects") not in ("None", "NoneOnDryRun"):
        raise errors.bad_request(f'admission webhook "{hook.name}" does not support dry run')


async def _call(api: ApiServer, attrs: Attributes, hook: Webhook, review: calling.Review) -> calling.Answer | None:
    """The webhook's answer; None when calling it failed and its failure policy is Ignore."""
    _check_dry_run(attrs, hook)
    try:
        answer = await calling.call(hook, review, api.options.webhook_service_addresses)
    except calling.Denied as e:
        attrs.warnings.extend(e.warnings)
        raise
    except calling.CallError as e:
        if hook.failure_policy == "Ignore":
            return None
        raise errors.internal_error(str(e)) from None
    attrs.warnings.extend(answer.warnings)
    return answer


def _invocation(api: ApiServer, hook: Webhook, req: Request, obj: Obj | None, old: Obj | None) -> Resource | None:
    target = matching.matched_resource(hook, req)
    if target is None or not matching.namespace_matches(api, hook, req, obj) \
            or not matching.object_matches(hook, obj, old):
        return None
    return target


def _apply_patch(hook: Webhook, kind: Resource, sent: Obj | None, patch: bytes) -> Obj | None:
    """The object the webhook's JSONPatch makes of ``sent`` (None: nothing to change)."""
    try:
        ops = orjson.loads(patch)
    except orjson.JSONDecodeError as e:
        raise calling.CallError(hook.name, f"received undecodable patch in webhook response: {e}") from None
    if not ops:
        return None
    if sent is None:
        raise errors.internal_error(f'admission webhook "{hook.name}" attempted to modify the object, which is not '
                                    "supported for this operation")
    try:
        patched = patching.json_patch(sent, ops)
    except patching.PatchError as e:
        raise errors.internal_error(e.message) from None
    if not isinstance(patched, dict):
        raise errors.internal_error("the patched object is not a JSON object")
    try:
        decoded = codec.typed(kind, patched, "Ignore").obj
    except errors.StatusError as e:
        raise errors.internal_error(str(e.status.get("message", ""))) from None
    return defaults.apply_defaults(kind, decoded, owned=True)


async def mutate(api: ApiServer, attrs: Attributes, operation: str, obj: Obj | None, old: Obj | None) -> Obj | None:
    """The mutating webhooks in order (then the reinvocations): ``obj`` as they leave it, in the request's
    version."""
    hooks = matching.webhooks(api, mutating=True)
    req = Request(attrs.res, attrs.subresource, attrs.namespace, operation)
    previously: set[str] = set()
    reinvoke: set[str] = set()
    for round_ in (0, 1):
        if round_ == 1 and not reinvoke:
            break
        for hook in hooks:
            if round_ == 1 and hook.uid not in reinvoke:
                continue
            target = _invocation(api, hook, req, obj, old)
            if target is None:
                continue
            review = _review(attrs, operation, target, obj, old)
            try:
                answer = await _call(api, attrs, hook, review)
                patched = None
                if answer is not None and answer.patch:
                    patched = _apply_patch(hook, attrs.decoded_as(target), review.obj, answer.patch)
            except calling.CallError as e:  # an undecodable patch: a failure to call like any other
                if hook.failure_policy == "Ignore":
                    patched = None
                else:
                    raise errors.internal_error(str(e)) from None
            if patched is not None and patched != review.obj:
                obj = matching.convert(patched, target, attrs.res)
                reinvoke |= previously
            if hook.reinvoke_if_needed and round_ == 0:
                previously.add(hook.uid)
    return obj


async def validate(api: ApiServer, attrs: Attributes, operation: str, obj: Obj | None, old: Obj | None) -> None:
    """The validating webhooks, all called at once: the refusal (or failure to call under ``Fail``) of the first
    of them in order is raised."""
    req = Request(attrs.res, attrs.subresource, attrs.namespace, operation)
    calls = []
    for hook in matching.webhooks(api, mutating=False):
        target = _invocation(api, hook, req, obj, old)
        if target is not None:
            calls.append(_call(api, attrs, hook, _review(attrs, operation, target, obj, old)))
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


# --- the passes -------------------------------------------------------------------------------------------

class _Stop(Exception):
    """Ends a dry pass at the point it was run for."""


class _Changed(Exception):
    """The object at the mutating point is not the one the webhooks were sent: start again."""


@dataclass
class _Seen:
    operation: str
    obj: Obj  # in the request's version
    old: Obj | None


def _comparable(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k not in _REGISTRY_FIELDS}
    if meta.get("generateName") and str(meta.get("name", "")).startswith(str(meta["generateName"])):
        meta.pop("name", None)
    return {**obj, "metadata": meta}


class _Point:
    """What :attr:`ApiServer.webhook_point` is during one pass; acts once, for the request's resource only."""

    def __init__(self, attrs: Attributes, *, stop_at: str | None, expected_rv: str | None = None,
                 mutated: Obj | None = None) -> None:
        self.attrs = attrs
        self.stop_at = stop_at
        self.expected_rv = expected_rv  # an update's old object's resourceVersion when the webhooks were called
        self.mutated = mutated  # what they made of it, request's version
        self.done_mutating = False
        self.done_validating = False
        self.seen_mutating: _Seen | None = None
        self.seen_validating: _Seen | None = None
        self.registry_fields: Obj = {}
        self.replaced: Obj | None = None  # the object this pass went on with, request's version

    def _ours(self, res: Resource) -> bool:
        return any(r.group == res.group and r.version == res.version and r.plural == res.plural
                   for r in matching.equivalents(self.attrs.res))

    def mutating(self, res: Resource, obj: Obj, old: Obj | None, old_res: Resource) -> Obj:
        if self.done_mutating or not self._ours(res):
            return obj
        self.done_mutating = True
        operation = "CREATE" if old is None else "UPDATE"
        meta = obj.get("metadata", {})
        if operation == "CREATE":
            self.registry_fields = {k: meta[k] for k in (*_REGISTRY_FIELDS, "name") if k in meta}
        request_obj = matching.convert(obj, res, self.attrs.res)
        request_old = matching.convert(old, old_res, self.attrs.res) if old is not None else None
        if self.stop_at == "mutating":
            sent = _comparable(request_obj) if operation == "CREATE" else request_obj
            self.seen_mutating = _Seen(operation, sent, request_old)
            raise _Stop
        if operation == "UPDATE" and self.expected_rv is not None \
                and str((old or {}).get("metadata", {}).get("resourceVersion")) != self.expected_rv:
            raise _Changed
        out = obj
        if self.mutated is not None:
            out = matching.convert(self.mutated, self.attrs.res, res)
        if operation == "CREATE":  # what the webhooks were not sent comes back from this pass
            out_meta = dict(out.get("metadata") or {})
            for key, value in self.registry_fields.items():
                if not out_meta.get(key):
                    out_meta[key] = value
            out = {**out, "metadata": out_meta}
        self.replaced = matching.convert(out, res, self.attrs.res)
        return out

    def validating(self, res: Resource, obj: Obj, old: Obj | None, old_res: Resource) -> None:
        if self.done_validating or not self._ours(res):
            return
        self.done_validating = True
        if self.stop_at == "validating":
            self.seen_validating = _Seen(
                "CREATE" if old is None else "UPDATE", matching.convert(obj, res, self.attrs.res),
                matching.convert(old, old_res, self.attrs.res) if old is not None else None)
            raise _Stop


@contextlib.contextmanager
def _installed(api: ApiServer, point: _Point) -> Iterator[None]:
    previous = api.webhook_point
    api.webhook_point = point
    try:
        yield
    finally:
        api.webhook_point = previous


def _dry(api: ApiServer, point: _Point, write: Callable[[bool], object]) -> bool:
    """Run ``write`` as a dry run up to ``point``'s stop; False when it ended without reaching it."""
    with _installed(api, point):
        try:
            write(True)
        except _Stop:
            return True
    return False


async def admit_write(api: ApiServer, attrs: Attributes, write: Callable[[bool], _T]) -> _T:
    """Run ``write(dry_run)`` (a create, update or patch through :class:`ApiServer`) with the webhooks that
    apply. ``write(True)`` must be a dry run of the same request."""
    if matching.is_exempt(attrs.res) or attrs.subresource == "scale":
        return write(False)
    ns = attrs.namespace
    mutating = matching.may_apply(api, attrs.res, attrs.subresource, ns, mutating=True)
    validating = matching.may_apply(api, attrs.res, attrs.subresource, ns, mutating=False)
    if not (mutating or validating):
        return write(False)
    for _ in range(_TRIES):
        expected: str | None = None
        mutated: Obj | None = None
        if mutating:
            first = _Point(attrs, stop_at="mutating")
            if not _dry(api, first, write) or first.seen_mutating is None:
                return write(False)  # ended (or failed) before admission: nothing for webhooks to see
            seen = first.seen_mutating
            if seen.old is not None:
                expected = str(seen.old.get("metadata", {}).get("resourceVersion"))
            sent = orjson.loads(orjson.dumps(seen.obj))
            result = await mutate(api, attrs, seen.operation, sent, seen.old)
            mutated = result if result is not None else sent
        if validating:
            second = _Point(attrs, stop_at="validating", expected_rv=expected, mutated=mutated)
            try:
                reached = _dry(api, second, write)
            except _Changed:
                continue
            if reached and second.seen_validating is not None:
                # The write stores what the validating webhooks saw: uid, creationTimestamp and name included.
                mutated = second.replaced if second.replaced is not None else mutated
                seen = second.seen_validating
                await validate(api, attrs, seen.operation, seen.obj, seen.old)
        final = _Point(attrs, stop_at=None, expected_rv=expected, mutated=mutated)
        with _installed(api, final):
            try:
                return write(False)
            except _Changed:
                continue
    raise errors.conflict(attrs.res.group, attrs.res.plural, attrs.name,
                          "the object changed while admission webhooks were called; please retry")


def may_apply(api: ApiServer, attrs: Attributes) -> bool:
    return matching.may_apply(api, attrs.res, attrs.subresource, attrs.namespace, mutating=True) \
        or matching.may_apply(api, attrs.res, attrs.subresource, attrs.namespace, mutating=False)


async def admit_subresource(api: ApiServer, attrs: Attributes, operation: str, obj: Obj, old: Obj | None) -> Obj:
    """A write to a subresource whose body is its own kind (pods/eviction and pods/binding CREATEs, a /scale
    UPDATE): the webhooks are sent the body (and the current Scale), and the mutating ones' result is what the
    subresource then acts on."""
    if not (matching.may_apply(api, attrs.res, attrs.subresource, attrs.namespace, mutating=True)
            or matching.may_apply(api, attrs.res, attrs.subresource, attrs.namespace, mutating=False)):
        return obj
    mutated = await mutate(api, attrs, operation, obj, old)
    obj = mutated if mutated is not None else obj
    await validate(api, attrs, operation, obj, old)
    return obj


async def admit_delete(api: ApiServer, attrs: Attributes, current: Obj | None) -> None:
    """DELETE: the webhooks are sent the object as it is (``oldObject``), none as ``object``."""
    if current is None or matching.is_exempt(attrs.res):
        return
    await mutate(api, attrs, "DELETE", None, current)
    await validate(api, attrs, "DELETE", None, current)
