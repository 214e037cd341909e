"""ApiServer: the in-memory API server with the real apiserver's storage semantics.

Guarantees:
- One cluster-wide resourceVersion counter; every write (create, update, patch, delete, subresource)
  takes the next one; a write that changes nothing takes none and emits no event (as etcd3's
  GuaranteedUpdate skips identical data).
- Create fills uid, creationTimestamp, generation and a generateName suffix; refuses existing names
  (409 AlreadyExists), missing namespaces (404) and namespaces being terminated (403).
- Update with a stale resourceVersion is a 409 Conflict; without one it is unconditional. Status and
  spec are each only written through their own endpoint. An update that removes the last finalizer of an
  object marked for deletion deletes it.
- Every kind-dependent step is the kind's strategy's (:mod:`registry`): this module holds no kind.
- Deletion follows ``registry.Store.Delete`` (see :mod:`deletion`); ``dry_run`` runs every check and
  stores nothing.
- The in-process calls are the same code the HTTP face uses. Single objects returned are private
  copies; objects from ``list`` and ``watch`` are shared and must not be mutated.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import controller_manager.sim.apiserver.defaults as defaults
import controller_manager.sim.apiserver.validation as validation
import controller_manager.sim.apiserver.validation_errors as validation_errors
from controller_manager.api import selectors
from controller_manager.api.fields import FieldSelector, parse_field_selector
from controller_manager.api.meta import format_time
from controller_manager.api.resources import (
    APISERVICES,
    BUILTIN,
    CONFIGMAPS,
    EVENTS,
    FLOWSCHEMAS,
    NAMESPACES,
    PRIORITYCLASSES,
    Resource,
)
from controller_manager.clock import Clock, RealClock
from controller_manager.sim.apiserver import (
    admission,
    apiservices,
    codec,
    component_status,
    errors,
    fieldmanager,
    flowcontrol_bootstrap,
    freshness,
    metrics_api,
    priority,
    schema,
    service_cidrs,
    sharing,
    ttl,
    versions,
)
from controller_manager.sim.apiserver.auth import Auth, bootstrap, legacy_tokens
from controller_manager.sim.apiserver.crd import CUSTOMRESOURCEDEFINITIONS
from controller_manager.sim.apiserver.crd.registry import CustomResources
from controller_manager.sim.apiserver.fieldsel import compile_selector
from controller_manager.sim.apiserver.objects import Obj, Stored, decode, encode, partial_metadata
from controller_manager.sim.apiserver.registry import Write, strategy_for
from controller_manager.sim.apiserver.storage import ResourceStore
from controller_manager.sim.apiserver.watch import View, Watcher, full_view

# utilrand's alphabet: no vowels or look-alike characters, so generated names never spell words.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATE_ATTEMPTS = 8
_STATUS_WRITE_KEEPS = frozenset({"apiVersion", "kind", "metadata", "status"})


PatchBody = bytes | str | dict[str, Any] | list[Any]


# ObjectMeta's fields after resourceVersion, in the order Go writes them
_AFTER_RESOURCE_VERSION = frozenset({"generation", "creationTimestamp", "deletionTimestamp",
                                     "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
                                     "finalizers", "managedFields"})


def _with_resource_version(meta: Obj, rv: str) -> Obj:
    """``meta`` with its resourceVersion, in ObjectMeta's field order (a new object has none yet)."""
    if "resourceVersion" in meta:
        return {**meta, "resourceVersion": rv}
    out: Obj = {}
    for key, value in meta.items():
        if key in _AFTER_RESOURCE_VERSION and "resourceVersion" not in out:
            out["resourceVersion"] = rv
        out[key] = value
    out.setdefault("resourceVersion", rv)
    return out


@dataclass
class ApiServerOptions:
    watch_history_size: int = 10_000      # changes kept per resource (the watch cache's capacity)
    event_ttl: float = 3600.0             # kube-apiserver's --event-ttl, in seconds (whole seconds count; 0: none)
    watch_buffer_size: int = 10_000       # events a watcher may fall behind before it is closed
    bookmark_interval: float = 60.0       # seconds between BOOKMARKs to watchers that allow them
    min_request_timeout: float = 1800.0   # a watch without timeoutSeconds lasts 1-2x this
    fresh_wait: float = freshness.BLOCK_TIMEOUT  # seconds a read of a future resourceVersion waits for it
    admin_token: str | None = None        # None: no authentication, everyone is admin
    viewer_token: str | None = None       # get/list/watch only
    git_version: str = "v1.37.0"
    bootstrap_rbac: bool = True           # create the bootstrap ClusterRoles and bindings at start-up
    service_account_admission: bool = False  # pods need their ServiceAccount and get its token volume
    # Fill ClusterRoles that have an aggregationRule here, after every ClusterRole write. kube-apiserver does
    # not (kube-controller-manager's clusterrole-aggregation-controller does); on so kube-sim is usable alone.
    aggregate_cluster_roles: bool = True
    # kube-apiserver's --service-account-key-file: PEM files whose public keys verify legacy ServiceAccount tokens
    service_account_key_files: tuple[str, ...] = ()
    # Where admission webhooks given as a Service are dialled: "<name>.<namespace>.svc:<port>" -> "host:port"
    # (kube-sim runs no pods to route to); see webhooks.calling.
    webhook_service_addresses: dict[str, str] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")
    resources: tuple[Resource, ...] = field(
        default_factory=lambda: (*BUILTIN, *metrics_api.RESOURCES, CUSTOMRESOURCEDEFINITIONS))


class WebhookPoint(Protocol):
    """Where admission webhooks act in a write (:mod:`webhooks.dispatch` sets one while it runs a write):
    ``mutating`` may replace the object after the built-in mutating admission, ``validating`` sees it after
    validation, before storage. ``old_res`` is the resource whose form ``old`` is in."""

    def mutating(self, res: Resource, obj: Obj, old: Obj | None, old_res: Resource) -> Obj: ...

    def validating(self, res: Resource, obj: Obj, old: Obj | None, old_res: Resource) -> None: ...


@dataclass(frozen=True)
class ListResult:
    items: list[Stored]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


def random_suffix(n: int = 5) -> str:
    return "".join(random.choice(NAME_ALPHABET) for _ in range(n))


def as_selector(value: str | selectors.Selector | None) -> selectors.Selector | None:
    if value is None or isinstance(value, selectors.Selector):
        return value
    try:
        return selectors.parse(value)
    except selectors.InvalidSelector as e:
        raise errors.bad_request(f"unable to parse requirement: {e}") from None


def as_field_selector(value: str | FieldSelector | None) -> FieldSelector | None:
    if value is None or isinstance(value, FieldSelector):
        return value
    try:
        return parse_field_selector(value)
    except selectors.InvalidSelector as e:
        raise errors.bad_request(str(e)) from None


def encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("unknown version")
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                                 "(version meta.k8s.io/v1)") from None


def _request_namespace(res: Resource, meta: dict[str, Any], namespace: str | None) -> str | None:
    """The namespace a write goes to: the URL's, else the object's, else "default" (None for a cluster-scoped
    resource). A namespaced object's ``metadata.namespace`` is set to it; one that names another is a 400."""
    if not res.namespaced:
        return None
    namespace = namespace or meta.get("namespace") or "default"
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                 "on the request")
    meta["namespace"] = namespace
    return namespace


class ApiServer:
    def __init__(self, clock: Clock | None = None, options: ApiServerOptions | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self.options = options or ApiServerOptions()
        self.rv = 0
        self.freshness = freshness.Freshness(self.current_rv)
        self.resources: tuple[Resource, ...] = self.options.resources
        self.builtin_resources = self.resources
        self._by_gvr = {(r.group, r.version, r.plural): r for r in self.resources}
        self._stores: dict[tuple[str, str], ResourceStore] = {}
        for res in self.resources:
            self._stores.setdefault(self._store_key(res), ResourceStore(res, self.options.watch_history_size, 0))
        self.crds = CustomResources(self)
        self.auth: Auth | None = None  # set once the bootstrap policy is in: its writes need no re-aggregation
        self.webhook_point: WebhookPoint | None = None  # set by webhooks.dispatch while it runs a write
        # What componentstatuses report: name -> health probe (SimCluster answers for its own scheduler)
        self.component_probes: dict[str, component_status.Probe] = component_status.default_probes()
        self.shared_parts = sharing.SharedParts()  # equal parts of stored objects held once
        # Events' etcd leases (--event-ttl): the Event strategy attaches each write, a lapsed lease deletes
        self.event_leases = ttl.Leases(self.clock, lambda: self.options.event_ttl, self._expire_events)
        for ns in self.options.namespaces:
            self.create(NAMESPACES, {"metadata": {"name": ns}})
        if self.lookup(PRIORITYCLASSES.group, PRIORITYCLASSES.version, PRIORITYCLASSES.plural) is not None:
            for pc in priority.SYSTEM_CLASSES:
                self.create(PRIORITYCLASSES, pc)
        service_cidrs.install(self, format_time(self.clock.now()))
        if self.lookup(FLOWSCHEMAS.group, FLOWSCHEMAS.version, FLOWSCHEMAS.plural) is not None:
            flowcontrol_bootstrap.install(self)
        if self.lookup(APISERVICES.group, APISERVICES.version, APISERVICES.plural) is not None:
            apiservices.install(self)
        if "kube-system" in self.options.namespaces:
            # kube-apiserver's legacytokentracking controller: the date from which legacy token use is recorded
            self.create(CONFIGMAPS, legacy_tokens.tracking_config_map(self.clock.now()))
        if self.options.bootstrap_rbac:
            bootstrap.install(self, viewer=bool(self.options.viewer_token))
        self.auth = Auth(self)
        self.auth.aggregator.reconcile()

    # --- lookup ------------------------------------------------------------------------------------

    @staticmethod
    def _store_key(res: Resource) -> tuple[str, str]:
        return strategy_for(res).store_key(res)

    def lookup(self, group: str, version: str, plural: str) -> Resource | None:
        return self._by_gvr.get((group, version, plural))

    def serve(self, added: Sequence[Resource]) -> None:
        """Serve more resources (a CRD's versions); versions of one group/plural share a store."""
        self.resources = (*self.resources, *added)
        for res in added:
            self._by_gvr[(res.group, res.version, res.plural)] = res
            self._stores.setdefault(self._store_key(res), ResourceStore(res, self.options.watch_history_size,
                                                                        self.rv))
        apiservices.sync_custom(self)  # the aggregator's CRD registration controller

    def unserve(self, removed: Sequence[Resource], *, keep_store: bool) -> None:
        """Stop serving resources; without ``keep_store`` their objects go too and their watches end."""
        gone = {(r.group, r.version, r.plural) for r in removed}
        self.resources = tuple(r for r in self.resources if (r.group, r.version, r.plural) not in gone)
        for key in gone:
            self._by_gvr.pop(key, None)
        if not keep_store:
            for res in removed:
                store = self._stores.pop(self._store_key(res), None)
                for watcher in list(store.watchers) if store is not None else []:
                    watcher.close("resource no longer served")
        apiservices.sync_custom(self)

    def store(self, res: Resource) -> ResourceStore:
        store = self._stores.get(self._store_key(res))
        if store is None:
            raise errors.path_not_found()
        return store

    def _next_rv(self) -> int:
        self.rv += 1
        self.freshness.advanced(self.rv)
        return self.rv

    def current_rv(self) -> int:
        return self.rv

    @staticmethod
    def key(res: Resource, namespace: str | None, name: str) -> str:
        return f"{namespace}/{name}" if res.namespaced else name

    def view(self, res: Resource, metadata_only: bool = False) -> View:
        """How this resource's stored versions are shown to a client (full, events.k8s.io, metadata only)."""
        if metadata_only:
            return lambda s: s.view("partial", partial_metadata)
        kind_view = strategy_for(res).view(res)
        if kind_view is not None:
            return kind_view
        if versions.storage_of(res) is not None:
            return lambda s: s.view(res.api_version, lambda obj: versions.from_storage(res, obj))
        return full_view

    def _out(self, res: Resource, stored: Stored) -> Obj:
        """A private copy of one object, as this resource shows it."""
        result: Obj = decode(self.view(res)(stored)[1])
        return result

    def _commit(self, store: ResourceStore, key: str, obj: Obj, dry_run: bool, *, normalized: bool = False,
                like: Obj | None = None) -> Stored:
        """Store ``obj`` at the next resourceVersion, written as the real server writes it (Go's JSON rules,
        :mod:`gojson`), so get, list and watch all return the same bytes. ``like``: an object already in that
        form whose parts equal to ``obj``'s are taken as they are."""
        if not normalized:
            obj = codec.normalize(store.resource, obj, like=like)
        if dry_run:
            # The dry-run storage returns the prepared object unstored: an update keeps the stored
            # resourceVersion, a create has none.
            current = store.get(key)
            if current is None:
                return Stored(key, obj, 0)
            rv = current.rv
        else:
            rv = self._next_rv()
            previous = store.get(key)
            obj = self.shared_parts.object(obj, None if previous is None else previous.obj)
        stored = Stored(key, {**obj, "metadata": _with_resource_version(obj["metadata"], str(rv))}, rv)
        if not dry_run:
            store.put(stored)
            strategy_for(store.resource).after_write(self, store.resource, stored.obj)
        return stored

    def store_prepared(self, res: Resource, obj: Obj) -> Obj:
        """Store an object the server makes for itself at start-up, already in its stored form (defaulted, valid,
        in Go's JSON form, metadata fields in place): only its resourceVersion is assigned here. Cheaper than a
        create, for configuration every new server writes; the caller's tests hold it equal to a create's."""
        store = self.store(res)
        key = self.key(res, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if store.get(key) is not None:
            raise errors.already_exists(res.group, res.plural, obj["metadata"]["name"])
        return self._commit(store, key, obj, False, normalized=True).obj

    def store_update_prepared(self, res: Resource, existing: Stored, obj: Obj) -> Stored:
        """Store ``obj`` over ``existing``, the latest stored version, where the caller holds the very object an
        update would store (stored form, managedFields included; only its resourceVersion is assigned here): the
        write and its watch event without the update's machinery. For in-process actors' periodic writes whose
        result is known (the kubelets' Lease renewals, :mod:`renewal`); their tests hold it equal to an update's."""
        store = self.store(res)
        if store.get(existing.key) is not existing:
            raise errors.conflict(res.group, res.plural, str(existing.obj["metadata"].get("name", "")))
        return self._commit(store, existing.key, obj, False, normalized=True)

    def _remove(self, store: ResourceStore, key: str, dry_run: bool) -> Stored:
        existing = store.objects[key]
        if dry_run:
            return existing
        removed = store.remove(key, self._next_rv()).new
        strategy_for(store.resource).after_remove(self, store.resource, removed.obj)
        return removed

    def _expire_events(self, keys: list[str]) -> None:
        """An Event lease's expiry: etcd deletes its keys in one transaction, so all at one resourceVersion."""
        store = self._stores.get(strategy_for(EVENTS).store_key(EVENTS))
        if store is None:
            return
        present = [key for key in keys if key in store.objects]
        if not present:
            return
        rv = self._next_rv()
        for key in present:
            removed = store.remove(key, rv).new
            strategy_for(store.resource).after_remove(self, store.resource, removed.obj)

    # --- admission ----------------------------------------------------------------------------------

    def admit_namespace(self, res: Resource, namespace: str | None, name: str, *, create: bool) -> None:
        """NamespaceLifecycle: no writes into missing namespaces, no creates into terminating ones."""
        if not res.namespaced or not strategy_for(res).namespace_lifecycle or not namespace:
            return
        ns = self.store(NAMESPACES).get(namespace)
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if create and (ns.obj.get("status") or {}).get("phase") == "Terminating":
            raise errors.forbidden(
                res.group, res.plural, name,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                causes=[{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                         "field": "metadata.namespace"}])

    def _type_meta(self, res: Resource, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise errors.bad_request("the object provided is not a JSON object")
        api_version = obj.get("apiVersion") or res.api_version
        kind = obj.get("kind") or res.kind
        if api_version != res.api_version or kind != res.kind:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                     f"API version ({res.api_version})" if api_version != res.api_version else
                                     f"the kind in the data ({kind}) does not match the expected kind ({res.kind})")
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        return {"kind": kind, "apiVersion": api_version, "metadata": dict(meta or {}),
                **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")}}

    # --- verbs -----------------------------------------------------------------------------------------

    def create(self, res: Resource, obj: Obj, namespace: str | None = None, *, dry_run: bool = False,
               typed: bool = False, field_manager: str | None = None,
               managed_fields: Any = fieldmanager.MISSING) -> Obj:
        """POST: the created object (a private copy); see :meth:`create_raw`."""
        created: Obj = decode(self.create_raw(res, obj, namespace, dry_run=dry_run, typed=typed,
                                              field_manager=field_manager, managed_fields=managed_fields))
        return created

    def create_raw(self, res: Resource, obj: Obj, namespace: str | None = None, *, dry_run: bool = False,
                   typed: bool = False, field_manager: str | None = None,
                   managed_fields: Any = fieldmanager.MISSING) -> bytes:
        """POST, answered with the created object's JSON as it is stored (no decode and re-encode).
        ``typed``: ``obj`` is a request body as :func:`codec.typed` decoded it, already in Go's JSON
        form, so the parts of it the create leaves as they are need no second pass when it is written.
        ``field_manager`` records the writer in managedFields (None: an internal write, untracked);
        ``managed_fields`` stores the given entries as they are (server-side apply computed them)."""
        storage = versions.storage_of(res)
        if storage is not None:
            # managedFields record the version the client wrote (the field manager of the request's version).
            obj = self._type_meta(res, obj)
            if managed_fields is fieldmanager.MISSING and field_manager is not None:
                incoming = (obj.get("metadata") or {}).get("managedFields", fieldmanager.MISSING)
                managed_fields = fieldmanager.track_update(res, None, versions.served_defaults(res, obj),
                                                           manager=field_manager, subresource="", incoming=incoming,
                                                           now=format_time(self.clock.now()))
            return encode(versions.from_storage(res, self.create(storage, versions.to_storage(res, obj), namespace,
                                                                 dry_run=dry_run, field_manager=field_manager,
                                                                 managed_fields=managed_fields)))
        store = self.store(res)
        body = obj if typed else None
        obj = self._type_meta(res, obj)
        meta = obj["metadata"]
        namespace = _request_namespace(res, meta, namespace)
        if not res.namespaced:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        generate = bool(meta.get("generateName")) and not meta.get("name")
        if generate:
            meta["name"] = meta["generateName"] + random_suffix()
        for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(f, None)
        incoming = meta.pop("managedFields", fieldmanager.MISSING)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = format_time(self.clock.now())
        obj = defaults.apply_defaults(res, obj)
        # The creator owns what it sent, defaults included, but not what the registry fills in below (nor what
        # mutating admission adds: upstream records managedFields before admission runs).
        if managed_fields is fieldmanager.MISSING and field_manager is not None:
            managed_fields = fieldmanager.track_update(res, None, obj, manager=field_manager, subresource="",
                                                       incoming=incoming, now=format_time(self.clock.now()))
        obj = admission.mutate(self, res, obj, namespace)  # (the defaulted copy is this write's own)
        if self.webhook_point is not None:
            obj = self.webhook_point.mutating(res, obj, None, res)
        kind = strategy_for(res)
        write = Write(self, res, namespace)
        obj = kind.before_create(write, obj)
        obj = kind.create_steps(write, obj)  # PrepareForCreate and validation
        stored_res = kind.storage(res)
        kind.admit_create(write)
        self.admit_namespace(res, namespace, obj["metadata"]["name"], create=True)
        if self.webhook_point is not None:
            self.webhook_point.validating(stored_res, obj, None, stored_res)
        quota_usage = admission.validate(self, res, obj, namespace, create=True)
        obj = codec.normalize(store.resource, obj, like=body)
        meta = _with_managed_fields(obj["metadata"], managed_fields)
        for _ in range(_MAX_GENERATE_ATTEMPTS if generate else 1):
            key = self.key(stored_res, namespace, meta["name"])
            existing = store.get(key)
            if existing is None:
                created = self._commit(store, key, {**obj, "metadata": meta}, dry_run, normalized=True)
                if not dry_run:
                    admission.record_quota_usage(self, quota_usage)
                    kind.after_create(self, created.obj)
                return self.view(res)(created)[1]
            if generate:
                meta = {**meta, "name": meta["generateName"] + random_suffix()}
        err = errors.already_exists(res.group, res.plural, meta["name"])
        if existing is not None and existing.obj["metadata"].get("deletionTimestamp"):
            err.status["message"] = "object is being deleted: " + err.status["message"]
        raise err

    def stored_object(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        """The object as stored, or None when absent."""
        found = self.store(res).get(self.key(res, namespace, name))
        return found.obj if found is not None else None

    def get_stored(self, res: Resource, namespace: str | None, name: str) -> Stored:
        stored = self.store(res).get(self.key(res, namespace, name))
        if stored is None:
            raise errors.not_found(res.group, res.plural, name)
        return stored

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        return self._out(res, self.get_stored(res, namespace, name))

    def list(self, res: Resource, namespace: str | None = None, *,
             label_selector: str | selectors.Selector | None = None,
             field_selector: str | FieldSelector | None = None) -> tuple[list[Obj], str]:
        """Every matching object (shared, read-only) and the list's resourceVersion."""
        result = self.list_page(res, namespace, label_selector=label_selector, field_selector=field_selector)
        view = self.view(res)
        return [view(s)[0] for s in result.items], str(result.resource_version)

    def list_page(self, res: Resource, namespace: str | None = None, *,
                  label_selector: str | selectors.Selector | None = None,
                  field_selector: str | FieldSelector | None = None, limit: int = 0,
                  continue_token: str | None = None, resource_version: str | None = None,
                  resource_version_match: str | None = None) -> ListResult:
        store = self.store(res)
        labels = as_selector(label_selector)
        labels = None if labels is None or labels.is_empty() else labels
        fsel = as_field_selector(field_selector)
        fields = compile_selector(res, fsel) if fsel is not None else None
        start = ""
        snapshot_rv: int | None = None
        if continue_token:
            snapshot_rv, start = decode_continue(continue_token)
        elif resource_version_match == "Exact" and resource_version:
            snapshot_rv = self._parse_rv(resource_version)
        if snapshot_rv is not None and snapshot_rv != self.rv:
            items = store.state_at(snapshot_rv, namespace, start)
            if items is None:
                if continue_token:
                    raise errors.expired(_CONTINUE_EXPIRED)
                raise errors.too_old_resource_version(snapshot_rv, store.floor)
            source: Any = iter(items)
            list_rv = snapshot_rv
        else:
            source = store.iter_from(namespace, start)
            list_rv = self.rv
        out: list[Stored] = []
        ns = namespace if res.namespaced else None
        for stored in source:
            if ns and stored.namespace != ns:
                continue
            if labels is not None and not labels.matches(stored.labels):
                continue
            if fields is not None and not fields(stored.obj):
                continue
            if limit and len(out) >= limit:
                token = encode_continue(list_rv, out[-1].key + "\x00")
                remaining = None
                if labels is None and fields is None:
                    remaining = 1 + sum(1 for _ in source)
                return ListResult(out, list_rv, token, remaining)
            out.append(stored)
        return ListResult(out, list_rv)

    @staticmethod
    def _parse_rv(value: str) -> int:
        try:
            rv = int(value)
            if rv < 0:
                raise ValueError
            return rv
        except ValueError:
            raise errors.bad_request(f"invalid resource version: {value}") from None

    def update(self, res: Resource, obj: Obj, *, subresource: str | None = None, dry_run: bool = False,
               namespace: str | None = None, name: str | None = None, field_manager: str | None = None,
               managed_fields: Any = fieldmanager.MISSING, manager_subresource: str | None = None,
               typed: bool = False, served: Resource | None = None) -> Obj:
        """PUT: the updated object (a private copy); see :meth:`update_raw`."""
        updated: Obj = decode(self.update_raw(res, obj, subresource=subresource, dry_run=dry_run, namespace=namespace,
                                              name=name, field_manager=field_manager, managed_fields=managed_fields,
                                              manager_subresource=manager_subresource, typed=typed, served=served))
        return updated

    def update_raw(self, res: Resource, obj: Obj, *, subresource: str | None = None, dry_run: bool = False,
                   namespace: str | None = None, name: str | None = None, field_manager: str | None = None,
                   managed_fields: Any = fieldmanager.MISSING, manager_subresource: str | None = None,
                   typed: bool = False, served: Resource | None = None) -> bytes:
        """PUT, answered with the object's JSON as it is stored.
        ``namespace``/``name`` are the URL's (they must match the object's when both are given).
        ``typed``: ``obj`` is the body as :func:`codec.typed` decoded it (see :meth:`create`).
        ``field_manager`` and ``managed_fields`` as for :meth:`create`; an untracked write keeps the stored
        managedFields; ``manager_subresource`` names the subresource the write is recorded under when it is
        not ``subresource`` (a /scale write updates the main resource)."""
        storage = versions.storage_of(res)
        if storage is not None:
            obj = versions.to_storage(res, self._type_meta(res, obj))
            return encode(versions.from_storage(res, self.update(
                storage, obj, subresource=subresource, dry_run=dry_run, namespace=namespace, name=name,
                field_manager=field_manager, managed_fields=managed_fields, manager_subresource=manager_subresource,
                served=res)))
        store = self.store(res)
        body = obj if typed else None
        obj = self._type_meta(res, obj)
        meta = obj["metadata"]
        # Set aside until the write is stored: defaulting, the strategy and validation have no use for them.
        incoming = meta.pop("managedFields", fieldmanager.MISSING)
        name = name or meta.get("name") or ""
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({name})")
        namespace = _request_namespace(res, meta, namespace)
        meta["name"] = name
        existing = store.get(self.key(res, namespace, name))
        kind = strategy_for(res)
        if existing is None:
            if subresource is None and kind.allow_create_on_update:
                return self.create_raw(*self._created_on_update(res, obj, namespace), dry_run=dry_run,
                                       field_manager=field_manager)
            raise errors.not_found(res.group, res.plural, name)
        new_rv = meta.get("resourceVersion")
        if new_rv and str(new_rv) != str(existing.rv):
            raise errors.conflict(res.group, res.plural, name)
        if not new_rv and not kind.allow_unconditional_update:
            # The generic store names the resource where the kind would go (leases.coordination.k8s.io).
            raise errors.StatusError(validation.invalid_status(
                (res.group, res.plural), name,
                [validation_errors.invalid("metadata.resourceVersion", 0, "must be specified for an update")]))
        if subresource == "status" and kind.defaults_spec_only and self.webhook_point is None:
            # The status strategy replaces everything but status and metadata with the stored values before
            # anything reads them: the defaults of the spec sent would be thrown away.
            obj = {k: v for k, v in obj.items() if k in _STATUS_WRITE_KEEPS}
            if not typed:
                obj = defaults.apply_defaults(res, obj)  # (a private copy: the caller keeps its dict)
            # else the body this request decoded, which nobody else holds, and whose parts nothing below edits
            # in place (the status strategy, validation and admission build new dicts): defaulting would only
            # copy it and add a spec to discard.
        else:
            obj = defaults.apply_defaults(res, obj)
        old = existing.obj
        stored_res = kind.storage(res)
        if self.webhook_point is not None:
            obj = self.webhook_point.mutating(res, obj, old, stored_res)
        write = Write(self, res, namespace, subresource, existing.key)
        obj = kind.before_update(write, obj, old)
        new = kind.update_steps(write, obj, old)  # PrepareForUpdate and validation
        self.admit_namespace(res, namespace, name, create=False)
        if self.webhook_point is not None:
            self.webhook_point.validating(stored_res, new, old, stored_res)
        quota_usage = admission.validate(self, res, new, namespace, create=False,
                                         old=old if subresource is None else None)
        track: Callable[[Obj, Obj], Any] | None = None
        if managed_fields is not fieldmanager.MISSING:
            def track(_live: Obj, _new: Obj) -> Any:
                return managed_fields
        elif field_manager is not None:
            manager = field_manager

            def track(live: Obj, new: Obj) -> Any:
                tracked = stored_res
                if served is not None:  # written through another version: tracked in that version
                    tracked = served
                    live, new = versions.from_storage(served, live), versions.from_storage(served, new)
                return fieldmanager.track_update(tracked, live, new, manager=manager,
                                                 subresource=manager_subresource or subresource or "",
                                                 incoming=incoming, now=format_time(self.clock.now()))
        written = self.write_update(stored_res, existing, new, dry_run, managed_fields=track, like=body)
        if not dry_run:
            admission.record_quota_usage(self, quota_usage)
        return self.view(res)(written)[1]

    def _created_on_update(self, res: Resource, obj: Obj, namespace: str | None) -> tuple[Resource, Obj, str | None]:
        """A PUT to a missing name of a kind that allows it: a create, the object's system metadata wiped
        (its uid is first checked as the update's precondition against the absent object)."""
        meta = obj["metadata"]
        if meta.get("uid"):
            raise errors.conflict(res.group, res.plural, meta["name"],
                                  f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: ")
        wiped = {k: v for k, v in meta.items() if k not in ("resourceVersion", "uid", "creationTimestamp",
                                                             "deletionTimestamp", "deletionGracePeriodSeconds",
                                                             "selfLink")}
        return res, {**obj, "metadata": wiped}, namespace

    def write_update(self, res: Resource, existing: Stored, new: Obj, dry_run: bool, *,
                     managed_fields: Callable[[Obj, Obj], Any] | None = None, like: Obj | None = None) -> Stored:
        """Store ``new`` over ``existing`` (already prepared and validated): a no-op writes nothing, and an
        object left without finalizers after its deletion was requested is deleted. ``managed_fields(live,
        new)`` gives the managedFields to store (default: the stored ones)."""
        store = self.store(res)
        # managedFields are replaced below: they are not worth normalizing.
        new_meta = {k: v for k, v in new["metadata"].items() if k != "managedFields"}
        new = codec.normalize(store.resource, {**new, "metadata": {**new_meta, "resourceVersion": str(existing.rv)}},
                              existing.obj, like)
        entries = (managed_fields(existing.obj, new) if managed_fields is not None
                   else existing.obj["metadata"].get("managedFields"))
        new["metadata"] = _with_managed_fields(new["metadata"], entries)
        if new == existing.obj:
            return existing
        old_meta = existing.obj["metadata"]
        if (not new["metadata"].get("finalizers") and old_meta.get("deletionTimestamp")
                and not old_meta.get("deletionGracePeriodSeconds")
                and not strategy_for(res).holds_removal(new)):
            self._remove(store, existing.key, dry_run)
            return Stored(existing.key, new, existing.rv)
        return self._commit(store, existing.key, new, dry_run, normalized=True)

    def patch(self, res: Resource, namespace: str | None, name: str, patch: PatchBody,
              patch_type: str, *, subresource: str | None = None, dry_run: bool = False,
              decode: Callable[[Obj, Obj], Obj] | None = None, field_manager: str | None = None,
              force: bool = False) -> Obj:
        """PATCH: ``decode(patched, stored)`` reads the patched object as the request's typed decoding would
        (strict field validation, type errors) before it is stored. ``patch_type`` "apply" is server-side
        apply (``field_manager`` required, ``force`` takes conflicting fields)."""
        from controller_manager.sim.apiserver import patch as patching
        from controller_manager.sim.apiserver import subresources
        from controller_manager.sim.apiserver.fieldmanager import apply

        if patch_type == "apply":
            if not isinstance(patch, bytes | str):
                patch = json.dumps(patch)
            if subresource == "scale":
                subresources.get_scale(self, res, namespace, name)  # 404 for kinds without /scale
                return apply.apply_scale(self, res, namespace, name, patch, manager=field_manager or "",
                                         force=force, dry_run=dry_run)
            return apply.apply(self, res, namespace, name, patch, manager=field_manager or "", force=force,
                               subresource=subresource, dry_run=dry_run, decode=decode)[0]
        if subresource == "scale":
            return subresources.patch_scale(self, res, namespace, name, patch, patch_type, dry_run=dry_run,
                                            field_manager=field_manager)
        if patch_type == "strategic" and not strategy_for(res).go_type:  # no Go struct to read patch tags from
            raise errors.unsupported_media_type(("application/json-patch+json", "application/merge-patch+json",
                                                 "application/apply-patch+yaml"))
        existing = self.get_stored(res, namespace if res.namespaced else None, name)
        original = self.view(res)(existing)[0]
        if not _mentions_managed_fields(patch):
            # Left out of the copy the patch works on; the update then starts from the stored ones.
            original = fieldmanager.updater.without_managed_fields(original)
        # A patch's numbers reach the typed decode as json-patch leaves them (their text), for built-in kinds.
        texts = decode is not None and isinstance(patch, bytes | str) and strategy_for(res).go_type \
            and schema.kind(res.api_version, res.kind) is not None
        try:
            patched = patching.apply_patch(original, patch, patch_type, res.kind,
                                           parse_float=codec.number_text if texts else None)
        except patching.PatchError as e:
            raise errors.StatusError(e.status()) from None
        if not isinstance(patched, dict):
            raise errors.bad_request("the patched object is not a JSON object")
        if decode is not None:
            patched = decode(codec.with_number_texts(patched) if texts else patched, existing.obj)
        meta = patched.get("metadata")
        if isinstance(meta, dict) and meta.get("name") not in (None, name):
            raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the "
                                     f"URL ({name})")
        return self.update(res, patched, subresource=subresource, dry_run=dry_run, namespace=namespace, name=name,
                           field_manager=field_manager)

    def delete(self, res: Resource, namespace: str | None, name: str, *, grace_period_seconds: int | None = None,
               propagation_policy: str | None = None, preconditions: dict[str, Any] | None = None,
               orphan_dependents: bool | None = None, dry_run: bool = False) -> Obj:
        """DELETE: the object as it now is (still there while graceful deletion or finalizers are pending),
        or, for kinds that do not return deleted objects, a Success Status."""
        from controller_manager.sim.apiserver import deletion

        options = deletion.DeleteOptions(grace_period_seconds, propagation_policy, orphan_dependents,
                                         dict(preconditions or {}), dry_run)
        kind = strategy_for(res)
        kind.before_delete(self, res, name, dry_run)
        result = deletion.delete(self, res, namespace if res.namespaced else None, name, options)
        kind.after_delete(self, res, name, dry_run)
        return result if isinstance(result, dict) else self._out(res, result)

    def watch(self, res: Resource, namespace: str | None = None, *, resource_version: str | None = None,
              label_selector: str | selectors.Selector | None = None,
              field_selector: str | FieldSelector | None = None, allow_bookmarks: bool = False,
              timeout_seconds: float | None = None, send_initial_events: bool | None = None,
              metadata_only: bool = False) -> Watcher:
        """A watch from ``resource_version`` (``None``/``"0"``: the current state as ADDED events first).
        Raises StatusError 410 when the version is older than the kept history; a version newer than the
        store's waits for the changes after it."""
        store = self.store(res)
        labels = as_selector(label_selector)
        fsel = as_field_selector(field_selector)
        fields = compile_selector(res, fsel) if fsel is not None else None
        initial: list[Stored] = []
        ns = namespace if res.namespaced else None
        view = self.view(res, metadata_only)
        bookmark_kind = ("meta.k8s.io/v1", "PartialObjectMetadata") if metadata_only else (res.api_version, res.kind)
        replay: list[Any] = []
        start_rv = 0
        if send_initial_events or not resource_version or resource_version == "0":
            initial = list(store.iter_from(ns))
        else:
            # A version the store has not reached yet is no error: the watch delivers what comes after it.
            start_rv = self._parse_rv(resource_version)
            if start_rv < store.floor:
                raise errors.too_old_resource_version(start_rv, store.floor)
            replay = store.changes_after(start_rv)
        timeout = timeout_seconds if timeout_seconds is not None else (
            self.options.min_request_timeout * (1 + random.random()))
        watcher = Watcher(store, namespace=ns, labels=labels, fields=fields, view=view,
                          bookmark_kind=bookmark_kind, current_rv=self.current_rv, clock=self.clock,
                          buffer_limit=self.options.watch_buffer_size, bookmarks=allow_bookmarks,
                          bookmark_interval=self.options.bookmark_interval, timeout=timeout, after_rv=start_rv)
        watcher.start(initial, replay, initial_events_end=bool(send_initial_events and allow_bookmarks))
        return watcher

    # --- simulated restarts ------------------------------------------------------------------------------

    def close_all_watches(self) -> None:
        for store in self._stores.values():
            for watcher in list(store.watchers):
                watcher.close("server closed")

    def forget_history(self) -> None:
        """Drop every resource's change history, as a restarted apiserver's fresh watch cache has none:
        a watch from any earlier resourceVersion now gets 410 Gone."""
        for store in self._stores.values():
            store.forget_history(self.rv)


def _mentions_managed_fields(patch: PatchBody) -> bool:
    if isinstance(patch, str):
        return "managedFields" in patch
    if isinstance(patch, bytes):
        return b"managedFields" in patch
    return "managedFields" in json.dumps(patch)


def _with_managed_fields(meta: Obj, entries: Any) -> Obj:
    """``meta`` carrying ``entries`` as managedFields (none: the key is left out, as omitempty writes it)."""
    if entries is fieldmanager.MISSING or not entries:
        if "managedFields" not in meta:
            return meta
        return {k: v for k, v in meta.items() if k != "managedFields"}
    return {**meta, "managedFields": entries}


_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")
