"""The HTTP face of :class:`ApiServer`: routing, authentication, negotiation, and list/watch streaming.

Guarantees:
- Paths, verbs and codes as kube-apiserver answers them: 201 on create, 200 otherwise; failures are
  Status bodies (400 bad JSON, 401, 403, 404 unknown paths and objects, 405 unsupported verbs, 406, 409,
  410, 415 unsupported body types, 422, 429).
- Bodies in JSON, YAML or (built-in kinds) protobuf; the patch content types for PATCH. Answers in JSON,
  in YAML or protobuf when the Accept header prefers them (:mod:`protowire`: kinds without a protobuf form
  fall back to JSON, or 406). JSON lists and watch events are written from each object's stored bytes,
  never re-encoded per request or per watcher.
- ``Accept`` may ask for ``as=PartialObjectMetadata[List]`` (metadata only) or ``as=Table`` (server-side
  printing); aggregated discovery (``as=APIGroupDiscoveryList``) is served when asked for, classic
  discovery otherwise.
- Whole answers over 128 KiB are gzip-compressed for ``Accept-Encoding: gzip`` (:mod:`compression`); a list
  or get at a resourceVersion the store has not reached waits for it (:mod:`freshness`); list/watch and
  dryRun options are checked first (:mod:`request_options`). A PUT that creates answers 201.
- A watch answers 200 and streams events; a resourceVersion too old becomes one ERROR event carrying the
  410 Status, then the stream ends. Watches started by this app end when it shuts down.
- While the app runs, so do the server's post-start loops: the API Priority and Fairness config producer
  (:func:`flowcontrol_bootstrap.run_producer`, when flowcontrol.apiserver.k8s.io is served).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import orjson
from aiohttp import web

from controller_manager import gctuning
from controller_manager.api.resources import FLOWSCHEMAS, Resource
from controller_manager.sim.apiserver import (
    audit,
    auth,
    codec,
    compression,
    discovery,
    errors,
    fieldmanager,
    flowcontrol_bootstrap,
    health,
    openapi,
    pod_logs,
    protowire,
    request_options,
    subresources,
    tables,
    webhooks,
    yamlbody,
)
from controller_manager.sim.apiserver.auth import noderestriction
from controller_manager.sim.apiserver.crd import list_kind
from controller_manager.sim.apiserver.fieldmanager import apply
from controller_manager.sim.apiserver.objects import Obj, encode
from controller_manager.sim.apiserver.registry import strategy_for
from controller_manager.sim.apiserver.requestinfo import RequestInfo, parse
from controller_manager.sim.apiserver.server import ApiServer, ListResult
from controller_manager.sim.apiserver.streaming.connect import CONNECT_SUBRESOURCES, StreamingServer
from controller_manager.sim.apiserver.watch import Watcher

JSON = "application/json"
_PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
                "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply"}
_HEALTH = ("/healthz", "/livez", "/readyz")
# What a subresource's body decodes into (for a protobuf body without apiVersion/kind, and its errors).
_SUBRESOURCE_KINDS = {"scale": ("autoscaling/v1", "Scale"), "eviction": ("policy/v1", "Eviction"),
                      "binding": ("v1", "Binding"), "token": ("authentication.k8s.io/v1", "TokenRequest")}
_T = TypeVar("_T")
_USER = web.RequestKey("user", auth.User)  # the request's authenticated user
_AUTH_WARNINGS = web.RequestKey("auth_warnings", list[str])  # what the authenticator warns the client of
_DELETE_OPTIONS = ("meta.k8s.io/v1", "DeleteOptions")
API_KEY = web.AppKey("api", ApiServer)
STREAMING_KEY = web.AppKey("streaming", StreamingServer)  # exec/attach/port-forward and their container runtime
_LIVENESS_CHECK = 5.0


class _Accept:
    """What the client's Accept header asks for: plain JSON, metadata only, or a Table."""

    def __init__(self, header: str) -> None:
        self.table = False
        self.partial = False
        self.aggregated = False
        self.json_ok = not header
        self.yaml = False  # YAML is the first plain type the client listed
        self.protobuf = False  # protobuf is listed before any JSON form: answer in it where the kind has one
        self.protobuf_ok = False
        for part in header.split(","):
            fields = [f.strip() for f in part.split(";")]
            mime = fields[0].lower()
            params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
            if mime == codec.PROTOBUF:
                self._protobuf(params)
                continue
            if mime == codec.YAML and "as" not in params and not self.json_ok:
                self.yaml = self.json_ok = True
                continue
            if mime not in ("application/json", "*/*", "application/*", "application/json-seq"):
                continue
            as_ = params.get("as")
            if as_ is None:
                self.json_ok = True
            elif as_ == "Table" and params.get("g") == "meta.k8s.io":
                self.table = self.table or not self.partial
            elif as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io":
                self.partial = self.partial or not self.table
            elif as_ == "APIGroupDiscoveryList" and params.get("v") == "v2":
                self.aggregated = True

    def _protobuf(self, params: dict[str, str]) -> None:
        as_ = params.get("as")
        partial = as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("g") == "meta.k8s.io"
        if as_ is not None and not partial:
            return  # a Table or discovery document: no protobuf form here
        if not (self.json_ok or self.table or self.partial):
            self.protobuf = True
        self.protobuf_ok = True
        if partial:
            self.partial = self.partial or not self.table

    def check(self) -> None:
        if not (self.json_ok or self.table or self.partial or self.protobuf_ok):
            raise errors.not_acceptable((JSON, codec.YAML, codec.PROTOBUF))

    def json_fallback(self) -> None:
        """A kind with no protobuf form: JSON if the client takes it, else 406 as for a custom resource."""
        if not (self.json_ok or self.table or (self.partial and not self.protobuf)):
            raise errors.not_acceptable((JSON, codec.YAML))


def _response(body: bytes, status: int = 200, content_type: str = JSON) -> web.Response:
    return web.Response(body=body, status=status, headers={"Content-Type": content_type})


def _status_response(err: errors.StatusError) -> web.Response:
    resp = _response(encode(err.status), err.code)
    _with_warnings(resp, getattr(err, "warnings", []))  # an admission webhook's, beside its refusal
    retry = (err.status.get("details") or {}).get("retryAfterSeconds")
    if retry:
        resp.headers["Retry-After"] = str(retry)
    return resp


def _int_param(query: Any, name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid value for {name}: "{value}"') from None


_OPTIONS_KIND = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions",
                 "delete": "DeleteOptions", "deletecollection": "DeleteOptions"}


_LISTS = frozenset({"list", "watch", "deletecollection"})


class _Handlers:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        assert api.auth is not None
        self.auth: auth.Auth = api.auth
        self.watchers: set[Watcher] = set()
        self.streaming = StreamingServer(api)

    async def on_shutdown(self, _app: web.Application) -> None:
        for watcher in list(self.watchers):
            watcher.close("server shutting down")
        await self.streaming.close_all()

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        auth_warnings: list[str] = []
        request[_AUTH_WARNINGS] = auth_warnings
        # Read once: the handlers pick the answer's form by it, and so does the re-encoding below.
        accept = _Accept(request.headers.get("Accept", ""))
        try:
            resp = await self._dispatch(request, accept)
        except errors.StatusError as e:
            resp = _status_response(e)
        if auth_warnings and isinstance(resp, web.Response):
            _with_warnings(resp, auth_warnings)  # the authenticator's (a legacy auto-generated token's)
        readable = not request.path.startswith("/openapi/")  # documents served in their own formats
        if readable and accept.protobuf and isinstance(resp, web.Response) and resp.content_type == JSON \
                and resp.body:
            resp = _as_protobuf(resp, accept)
        if readable and accept.yaml and isinstance(resp, web.Response) and resp.content_type == JSON and resp.body:
            # The same answer in the representation asked for (objects, lists and errors alike).
            resp.body = yamlbody.json_value_to_yaml(orjson.loads(resp.body))  # type: ignore[arg-type]
            resp.content_type = codec.YAML
        if isinstance(resp, web.Response):
            compression.maybe_gzip(resp, request.headers.get("Accept-Encoding", ""))
        return resp

    async def _dispatch(self, request: web.Request, accept: _Accept) -> web.StreamResponse:
        user = self.auth.authenticate(request.headers, request[_AUTH_WARNINGS])
        request[_USER] = user
        audit.note_user(user)
        info = parse(request.method, request.path, request.query)
        if not info.is_resource:
            # A path's verb is the lowercased method (RequestInfoFactory), HEAD read as GET.
            self.auth.check_path(user, "get" if request.method == "HEAD" else request.method.lower(), request.path)
            return self._non_resource(request, info, accept)
        self.auth.check_resource(user, info.verb, info.group, info.resource, info.subresource, info.namespace,
                                 info.name, request.query.get("fieldSelector", "") if info.verb in _LISTS else "")
        res = self.api.lookup(info.group, info.version, info.resource)
        if res is None or info.extra_parts:
            raise errors.path_not_found()
        ns = info.namespace if res.namespaced else ""
        accept.check()
        if accept.table:
            tables.check_include_object(request.query.get("includeObject", ""))
        if info.verb not in res.verbs and not (info.subresource and info.verb in ("get", "update", "patch",
                                                                                  "create")):
            raise errors.method_not_allowed()
        if strategy_for(res).deprecation_warning:  # the installer's, on every request of a deprecated kind
            request[_AUTH_WARNINGS].append(strategy_for(res).deprecation_warning)
        if strategy_for(res).computed:  # (metrics.k8s.io, componentstatuses) computed on each read, not stored
            return await self._computed(request, res, info, ns or None, accept)
        if info.verb in ("watch", "list"):
            opts = request_options.list_options(request.query, watch=info.verb == "watch")
            if info.verb == "watch":
                return await self._watch(request, res, ns or None, accept, opts)
            if not opts.continue_token:
                await self._wait_fresh(opts.resource_version)
            return self._list(request, res, ns or None, accept)
        return await self._object(request, res, info, ns or None, accept)

    async def _computed(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                        accept: _Accept) -> web.Response:
        if info.subresource:
            raise errors.path_not_found()
        answer = await strategy_for(res).read_async(self.api, res, info.verb, namespace, info.name, request.query)
        if accept.table:
            listed = info.verb == "list"
            answer = tables.table(res, answer["items"] if listed else [answer], self.api.clock.now(),
                                  str(answer["metadata"].get("resourceVersion") or "") if listed else None,
                                  include_object=request.query.get("includeObject", "Metadata"))
        return _response(encode(answer))

    # --- non-resource paths -----------------------------------------------------------------------

    def _non_resource(self, request: web.Request, info: RequestInfo, accept: _Accept) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        resources = self.api.resources
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed() if path in ("/api", "/apis", "/version") else errors.path_not_found()
        if any(path == p or path.startswith(p + "/") for p in _HEALTH):
            text = health.answer(path, "verbose" in request.query, request.query.getall("exclude", []))
            if text is None:
                raise errors.path_not_found()
            return web.Response(text=text, content_type="text/plain", charset="utf-8",
                                headers={"X-Content-Type-Options": "nosniff"})
        if path == "/version":
            return _response(encode(discovery.version_info(self.api.options.git_version)))
        oidc = self.auth.oidc(path, request.host)
        if oidc is not None:
            return _response(oidc[0], content_type=oidc[1])
        if path == "/metrics":
            return web.Response(text=self._metrics(), content_type="text/plain")
        if path in ("/openapi/v2", "/openapi/v3") or path.startswith("/openapi/v3/"):
            return openapi.respond(request, resources, self.api.options.git_version)
        if path in ("/api", "/apis") and accept.aggregated:
            doc = discovery.aggregated(resources, core=path == "/api")
            return _response(encode(doc), content_type=discovery.AGGREGATED_CONTENT_TYPE)
        if path == "/api":
            return _response(encode(discovery.api_versions(request.host)))
        if path == "/apis":
            return _response(encode(discovery.api_group_list(resources)))
        found: Obj | None = None
        if info.version:
            found = discovery.api_resource_list(resources, info.group, info.version)
        elif path.startswith("/apis/") and path.count("/") == 2:
            found = discovery.api_group(resources, path.split("/")[2])
        if found is None:
            raise errors.path_not_found()
        return _response(encode(found))

    def _metrics(self) -> str:
        lines = ["# HELP apiserver_storage_objects Number of stored objects at the time of last check split by kind.",
                 "# TYPE apiserver_storage_objects gauge"]
        for r in self.api.resources:
            if "get" in r.verbs:
                lines.append(f'apiserver_storage_objects{{resource="{r.group_resource}"}} {len(self.api.store(r))}')
        return "\n".join(lines) + "\n" + gctuning.pauses_text()

    # --- list / watch ------------------------------------------------------------------------------

    async def _wait_fresh(self, resource_version: str) -> None:
        """A read at a resourceVersion the store has not reached yet waits for it (the watch cache's way)."""
        if resource_version.isdigit() and resource_version != "0":
            await self.api.freshness.wait_for(int(resource_version), self.api.options.fresh_wait)

    def _list(self, request: web.Request, res: Resource, namespace: str | None, accept: _Accept) -> web.Response:
        q = request.query
        result = self.api.list_page(res, namespace, label_selector=q.get("labelSelector") or None,
                                    field_selector=q.get("fieldSelector") or None, limit=_int_param(q, "limit") or 0,
                                    continue_token=q.get("continue") or None,
                                    resource_version=q.get("resourceVersion") or None,
                                    resource_version_match=q.get("resourceVersionMatch") or None)
        if accept.table:
            view = self.api.view(res)
            doc = tables.table(res, [view(s)[0] for s in result.items], self.api.clock.now(),
                               str(result.resource_version), include_object=q.get("includeObject", "Metadata"),
                               continue_token=result.continue_token, remaining=result.remaining)
            return _response(encode(doc))
        view = self.api.view(res, accept.partial)
        if accept.partial:
            head = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1"}
        else:
            head = {"kind": list_kind(res), "apiVersion": res.api_version}
        if accept.protobuf:
            body = protowire.list_body(head, _list_meta(result), [view(s) for s in result.items])
            if body is not None:
                return _response(body, content_type=protowire.CONTENT_TYPE)
        return _response(_list_bytes(head, result, (view(s)[1] for s in result.items)))

    async def _watch(self, request: web.Request, res: Resource, namespace: str | None, accept: _Accept,
                     opts: request_options.ListOptions) -> web.StreamResponse:
        q = request.query
        proto = accept.protobuf and not accept.table and protowire.watchable(res, accept.partial)
        if accept.protobuf and not proto:
            accept.json_fallback()
        content_type = protowire.WATCH_CONTENT_TYPE if proto else JSON
        try:
            if opts.send_initial_events:  # a watch-list first waits for its version, as a list does
                await self._wait_fresh(opts.resource_version)
            watcher = self.api.watch(
                res, namespace, resource_version=opts.resource_version or None,
                label_selector=q.get("labelSelector") or None, field_selector=q.get("fieldSelector") or None,
                allow_bookmarks=opts.allow_watch_bookmarks, timeout_seconds=_int_param(q, "timeoutSeconds"),
                send_initial_events=opts.send_initial_events, metadata_only=accept.partial)
        except errors.StatusError as e:
            if e.code == 400:
                raise
            resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
            await resp.prepare(request)
            raw = encode(e.status)
            await resp.write(protowire.watch_frames([("ERROR", e.status, raw)]) if proto
                             else b'{"type":"ERROR","object":' + raw + b"}\n")
            await resp.write_eof()
            return resp
        self.watchers.add(watcher)
        resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        try:
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            first = True
            while True:
                # A client that went away is noticed within a few seconds even when nothing is written.
                if request.transport is None or request.transport.is_closing():
                    break
                try:
                    await asyncio.wait_for(watcher.wait_ready(), _LIVENESS_CHECK)
                except TimeoutError:
                    continue
                if accept.table:
                    batch = await watcher.next_batch()
                    if batch is None:
                        break
                    now = self.api.clock.now()
                    chunk = b""
                    for type_, obj, _raw in batch:
                        row = (tables.table(res, [obj or {}], now, with_columns=first,
                                            include_object=q.get("includeObject", "Metadata"))
                               if type_ != "BOOKMARK" else obj)
                        first = False
                        chunk += b'{"type":"' + type_.encode() + b'","object":' + encode(row) + b"}\n"
                elif proto:
                    events = await watcher.next_batch()
                    if events is None:
                        break
                    chunk = protowire.watch_frames(events)
                else:
                    lines = await watcher.next_lines()
                    if lines is None:
                        break
                    chunk = lines
                await resp.write(chunk)
            with contextlib.suppress(ConnectionResetError):
                await resp.write_eof()
            return resp
        except ConnectionResetError:
            # The watcher went away mid-write (closed its stream, or its process died): the watch just ends.
            # Raising would make aiohttp log "Error handling request" with a traceback for a normal event.
            return resp
        finally:
            watcher.close()
            self.watchers.discard(watcher)

    # --- single objects ----------------------------------------------------------------------------

    async def _body(self, request: web.Request, patch: bool = False, res: Resource | None = None,
                    expect: tuple[str, str] | None = None, number_texts: bool = False) -> Any:
        """The body parsed by its media type (raw bytes for a patch); not yet decoded into its kind. ``res``:
        the resource, whose built-in kinds take protobuf; ``expect``: the kind read when not ``res``'s."""
        ctype = codec.media_type(request.headers.get("Content-Type", ""))
        raw = await request.read()
        if patch:
            if ctype not in _PATCH_TYPES:
                raise errors.unsupported_media_type(tuple(_PATCH_TYPES))
            return raw
        return codec.parse(raw, ctype, keep_duplicates=request.query.get("fieldValidation") != "Ignore", res=res,
                           expect=expect, number_texts=number_texts)

    async def _object(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                      accept: _Accept) -> web.StreamResponse:
        api = self.api
        q = request.query
        verb, sub, name = info.verb, info.subresource or None, info.name
        dry_run = request_options.dry_run(q, _OPTIONS_KIND[verb]) if verb in _OPTIONS_KIND else False
        if sub is not None and sub not in res.subresources:
            raise errors.path_not_found()
        if verb in ("update", "patch") and not name:
            raise errors.method_not_allowed()
        if sub in CONNECT_SUBRESOURCES and namespace is not None:
            if verb not in ("get", "create"):
                raise errors.method_not_allowed()
            return await self.streaming.serve(request, request[_USER], namespace, name, sub)
        manager = ""
        if verb in ("create", "update", "patch"):
            is_apply = codec.media_type(request.headers.get("Content-Type", "")) == "application/apply-patch+yaml"
            fieldmanager.validate_field_manager(q, _OPTIONS_KIND[verb], apply=verb == "patch" and is_apply)
            manager = fieldmanager.manager_name(q.get("fieldManager"), request.headers.get("User-Agent", ""))
        if verb == "get":
            if sub == "log" and namespace is not None:
                return await pod_logs.pod_log(api, request, namespace, name)
            if sub == "scale":
                scale = subresources.get_scale(api, res, namespace, name)
                if accept.table:
                    scale = tables.table(res, [scale], api.clock.now(), kind=("autoscaling", "Scale"),
                                         include_object=q.get("includeObject", "Metadata"))
                return _response(encode(scale))
            if sub not in (None, "status", "approval"):
                raise errors.method_not_allowed()
            await self._wait_fresh(q.get("resourceVersion") or "")
            stored = api.get_stored(res, namespace, name)
            raw = api.view(res, accept.partial)(stored)[1]
            if accept.table:
                raw = encode(tables.table(res, [api.view(res)(stored)[0]], api.clock.now(), str(stored.rv),
                                          include_object=q.get("includeObject", "Metadata")))
            return _response(raw)
        if verb == "create":
            kind = strategy_for(res)
            # A create or update body is decoded into its kind straight from its bytes (quantities read
            # their numbers' text); the review kinds and subresources take theirs elsewhere.
            typed_body = sub is None and kind.decodes_body
            body = await self._body(request, res=res, expect=_SUBRESOURCE_KINDS.get(sub or ""),
                                    number_texts=typed_body)
            if sub is not None and sub not in ("binding", "eviction") and isinstance(body, dict):
                self._restrict(request, res, "CREATE", sub, namespace or "", name, body)  # (a node's TokenRequest)
            hooked: list[str] = []
            if sub in ("binding", "eviction") and namespace and isinstance(body, dict):
                self._restrict(request, res, "CREATE", sub, namespace, name, body)
                body, hooked = await self._admitted_subresource(request, res, info, namespace, body, None, dry_run,
                                                                manager)
            # Reviews, TokenRequests, bindings and evictions: answered by the kind, the body never stored.
            answer = kind.answer_create(api, res, sub, namespace, name, body, request[_USER], dry_run)
            if answer is not None:
                return _with_warnings(_response(encode(answer), 201), hooked)
            if sub is not None or name:
                raise errors.method_not_allowed()
            if body is None:
                raise errors.bad_request("the body of the request is empty")
            decoded = codec.typed(res, body, codec.field_validation(q, "CreateOptions"), parsed=True)
            if isinstance(decoded.obj, dict):
                decoded.obj = kind.on_create_request(decoded.obj, request[_USER])
            self._restrict(request, res, "CREATE", "", namespace or "",
                           str((decoded.obj.get("metadata") or {}).get("name") or "")
                           if isinstance(decoded.obj, dict) else "", decoded.obj)
            self.auth.check_escalation(request[_USER], res.kind, res.group, namespace or "", decoded.obj)
            obj = decoded.obj
            created, hooked = await self._admitted(request, res, info, namespace, dry_run, manager, lambda dry:
                                                   api.create_raw(res, obj, namespace, dry_run=dry_run or dry,
                                                                  typed=True, field_manager=manager))
            return _with_warnings(_response(created, 201), decoded.warnings + hooked)
        if verb == "update":
            body = await self._body(request, res=res, expect=_SUBRESOURCE_KINDS.get(sub or ""),
                                    number_texts=sub in (None, "status", "finalize", "approval"))
            if sub == "scale":
                hooked = []
                if isinstance(body, dict):
                    old = subresources.get_scale(api, res, namespace, name)
                    body, hooked = await self._admitted_subresource(request, res, info, namespace, body, old,
                                                                    dry_run, manager)
                return _with_warnings(_response(encode(subresources.update_scale(
                    api, res, namespace, name, body, dry_run=dry_run, field_manager=manager))), hooked)
            if sub not in (None, "status", "finalize", "approval"):
                raise errors.method_not_allowed()
            if not isinstance(body, dict):
                raise errors.bad_request("the body of the request is empty" if body is None
                                         else "the object provided is not a JSON object")
            current = api.stored_object(res, namespace, name)  # a PUT may create (201) for some kinds
            decoded = codec.typed(res, body, codec.field_validation(q, "UpdateOptions"), current, parsed=True)
            self._restrict(request, res, "UPDATE" if current is not None else "CREATE", sub or "", namespace or "",
                           name, decoded.obj, current)
            self.auth.check_escalation(request[_USER], res.kind, res.group, namespace or "", decoded.obj)
            new = fieldmanager.keep_reset(body, decoded.obj)
            updated, hooked = await self._admitted(request, res, info, namespace, dry_run, manager, lambda dry:
                                                   api.update_raw(res, new, subresource=sub,
                                                                  dry_run=dry_run or dry, namespace=namespace,
                                                                  name=name, field_manager=manager, typed=True))
            return _with_warnings(_response(updated, 200 if current is not None else 201),
                                  decoded.warnings + hooked)
        if verb == "patch":
            body = await self._body(request, patch=True)
            if sub not in (None, "status", "scale", "approval"):
                raise errors.method_not_allowed()
            ctype = codec.media_type(request.headers.get("Content-Type", ""))
            validation = codec.field_validation(q, "PatchOptions")
            warnings: list[str] = []

            def decode(patched: Obj, stored: Obj) -> Obj:
                decoded = codec.typed(res, patched, validation, stored)
                self._restrict(request, res, "UPDATE" if stored else "CREATE", sub or "", namespace or "", name,
                               decoded.obj, stored or None)
                self.auth.check_escalation(request[_USER], res.kind, res.group, namespace or "", decoded.obj)
                warnings.extend(decoded.warnings)
                return fieldmanager.keep_reset(patched, decoded.obj)

            if sub == "scale" and _PATCH_TYPES[ctype] != "apply":
                scaled = await self._patched_scale(request, res, info, namespace, body, _PATCH_TYPES[ctype], dry_run,
                                                   manager)
                if scaled is not None:
                    return scaled
            if _PATCH_TYPES[ctype] == "apply" and sub != "scale":
                was: list[bool] = []

                def apply_once(dry: bool) -> Obj:
                    applied, was_created = apply.apply(api, res, namespace, name, body, manager=manager,
                                                       force=q.get("force", "").lower() in ("1", "t", "true"),
                                                       subresource=sub, dry_run=dry_run or dry, decode=decode)
                    was[:] = [was_created]
                    return applied

                applied, hooked = await self._admitted(request, res, info, namespace, dry_run, manager, apply_once)
                return _with_warnings(_response(encode(applied), 201 if was[0] else 200),
                                      list(dict.fromkeys(warnings)) + hooked)
            patched, hooked = await self._admitted(request, res, info, namespace, dry_run, manager, lambda dry:
                                                   api.patch(res, namespace, name, body, _PATCH_TYPES[ctype],
                                                             subresource=sub, dry_run=dry_run or dry,
                                                             decode=decode if sub != "scale" else None,
                                                             field_manager=manager,
                                                             force=q.get("force", "").lower() in ("1", "t", "true")))
            return _with_warnings(_response(encode(patched)), list(dict.fromkeys(warnings)) + hooked)
        if verb == "delete":
            if sub is not None:
                raise errors.method_not_allowed()
            body = await self._body(request, res=res, expect=_DELETE_OPTIONS)
            hooked = await self._admitted_delete(request, res, info, namespace, name, body, dry_run)
            return _with_warnings(_response(encode(self._delete(res, namespace, name, body, q, dry_run))), hooked)
        if verb == "deletecollection":
            body = await self._body(request, res=res, expect=_DELETE_OPTIONS)
            return await self._delete_collection(request, res, info, namespace, body, dry_run)
        raise errors.method_not_allowed()

    def _delete(self, res: Resource, namespace: str | None, name: str, body: Any, q: Any, dry_run: bool) -> Obj:
        opts = body if isinstance(body, dict) else {}
        grace = opts.get("gracePeriodSeconds", _int_param(q, "gracePeriodSeconds"))
        policy = opts.get("propagationPolicy") or q.get("propagationPolicy") or None
        orphan = opts.get("orphanDependents")
        if orphan is None and q.get("orphanDependents") is not None:
            orphan = q.get("orphanDependents", "").lower() == "true"
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        return self.api.delete(res, namespace, name, grace_period_seconds=grace, propagation_policy=policy,
                               preconditions=opts.get("preconditions"), orphan_dependents=orphan, dry_run=dry_run)

    async def _delete_collection(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                                 body: Any, dry_run: bool) -> web.Response:
        q = request.query
        result = self.api.list_page(res, namespace, label_selector=q.get("labelSelector") or None,
                                    field_selector=q.get("fieldSelector") or None)
        deleted: list[bytes] = []
        hooked: list[str] = []
        for stored in result.items:
            meta = stored.obj["metadata"]
            try:
                hooked += await self._admitted_delete(request, res, info, meta.get("namespace"), meta["name"], body,
                                                      dry_run)
                out = self._delete(res, meta.get("namespace"), meta["name"], body, q, dry_run)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                continue
            deleted.append(encode(out))
        head = {"kind": list_kind(res), "apiVersion": res.api_version}
        return _with_warnings(_response(_list_bytes(head, ListResult([], self.api.current_rv()), deleted)), hooked)

    # --- admission webhooks (webhooks.dispatch) ------------------------------------------------------------

    async def _admitted(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                        dry_run: bool, manager: str, write: Callable[[bool], _T]) -> tuple[_T, list[str]]:
        """``write(dry)`` run with the admission webhooks that apply; the object and the webhooks' warnings."""
        # A Namespace's own path names it as the request's namespace too (RequestInfo), as webhooks are told.
        ns = info.namespace if strategy_for(res).names_own_namespace else namespace or ""
        attrs = webhooks.Attributes(res, info.subresource, ns, info.name, request[_USER].as_user_info(), dry_run,
                                    manager)
        return await webhooks.admit_write(self.api, attrs, write), attrs.warnings

    def _subresource_attributes(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                                dry_run: bool, manager: str) -> webhooks.Attributes:
        api_version, kind = _SUBRESOURCE_KINDS[info.subresource]
        group, _, version = api_version.rpartition("/")
        return webhooks.Attributes(res, info.subresource, namespace or "", info.name, request[_USER].as_user_info(),
                                   dry_run, manager, kind=(group, version, kind))

    async def _admitted_subresource(self, request: web.Request, res: Resource, info: RequestInfo,
                                    namespace: str | None, body: Obj, old: Obj | None, dry_run: bool,
                                    manager: str) -> tuple[Obj, list[str]]:
        """pods/binding, pods/eviction (CREATE) and /scale (UPDATE over ``old``): the webhooks see (and may
        change) the Binding, Eviction or Scale sent."""
        attrs = self._subresource_attributes(request, res, info, namespace, dry_run, manager)
        operation = "CREATE" if old is None else "UPDATE"
        return await webhooks.admit_subresource(self.api, attrs, operation, body, old), attrs.warnings

    async def _patched_scale(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                             body: bytes, patch_type: str, dry_run: bool, manager: str) -> web.Response | None:
        """A /scale patch when webhooks may apply: the patched Scale through them, then written as an update
        (None when no webhook applies: the patch then takes its usual way)."""
        if not webhooks.may_apply(self.api, self._subresource_attributes(request, res, info, namespace, dry_run,
                                                                         manager)):
            return None
        from controller_manager.sim.apiserver import patch as patching

        current = subresources.get_scale(self.api, res, namespace, info.name)
        try:
            patched = patching.apply_patch(current, body, patch_type, "Scale")
        except patching.PatchError as e:
            raise errors.StatusError(e.status()) from None
        scale, hooked = await self._admitted_subresource(request, res, info, namespace, patched, current, dry_run,
                                                         manager)
        return _with_warnings(_response(encode(subresources.update_scale(
            self.api, res, namespace, info.name, scale, dry_run=dry_run, field_manager=manager))), hooked)

    def _restrict(self, request: web.Request, res: Resource, operation: str, subresource: str, namespace: str,
                  name: str, obj: Any, old: Obj | None = None) -> None:
        """NodeRestriction, the first admission plugin to see a node's write."""
        noderestriction.admit(self.api, request[_USER], operation, res, subresource, namespace, name,
                              obj if isinstance(obj, dict) else None, old)

    async def _admitted_delete(self, request: web.Request, res: Resource, info: RequestInfo, namespace: str | None,
                               name: str, body: Any, dry_run: bool) -> list[str]:
        """The admission webhooks of a DELETE of ``name`` (none when it is absent: the delete then answers 404)."""
        opts = body if isinstance(body, dict) else {}
        dry_run = dry_run or "All" in (opts.get("dryRun") or [])
        try:
            current = self.api.get(res, namespace if res.namespaced else None, name)
        except errors.StatusError:
            return []
        self._restrict(request, res, "DELETE", "", namespace or "", name, None, current)
        ns = name if strategy_for(res).names_own_namespace else namespace or ""  # (as in _admitted)
        attrs = webhooks.Attributes(res, "", ns, name, request[_USER].as_user_info(), dry_run)
        await webhooks.admit_delete(self.api, attrs, current)
        return attrs.warnings


def _as_protobuf(resp: web.Response, accept: _Accept) -> web.Response:
    """The same answer in protobuf (objects, lists and errors alike); JSON or 406 for a kind without one."""
    assert isinstance(resp.body, bytes)
    body = protowire.object_body(resp.body)
    if body is None:
        try:
            accept.json_fallback()
        except errors.StatusError as e:
            return _as_protobuf(_status_response(e), _Accept(""))
        return resp
    resp.body = body
    resp.content_type = protowire.CONTENT_TYPE
    return resp


def _with_warnings(resp: web.Response, warnings: list[str]) -> web.Response:
    for message in warnings:
        resp.headers.add("Warning", codec.warning_header(message))
    return resp


def _list_meta(result: ListResult) -> Obj:
    meta: Obj = {"resourceVersion": str(result.resource_version)}
    if result.continue_token:
        meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
    return meta


def _list_bytes(head: Obj, result: ListResult, items: Iterable[bytes]) -> bytes:
    prefix = encode({**head, "metadata": _list_meta(result)})[:-1]
    return prefix + b',"items":[' + b",".join(items) + b"]}"


async def _post_start_loops(api: ApiServer, _app: web.Application) -> AsyncIterator[None]:
    """kube-apiserver's post-start hooks that go on running: started with the app, cancelled at its cleanup."""
    tasks: list[asyncio.Task[None]] = []
    if api.lookup(FLOWSCHEMAS.group, FLOWSCHEMAS.version, FLOWSCHEMAS.plural) is not None:
        tasks.append(asyncio.create_task(flowcontrol_bootstrap.run_producer(api), name="apf-config-producer"))
    yield
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def build_app(api: ApiServer, *, middlewares: Iterable[Any] = ()) -> web.Application:
    """The aiohttp application serving ``api``; ``middlewares`` run before the API handlers (fault injection)."""
    app = web.Application(middlewares=list(middlewares), client_max_size=64 * 1024 * 1024)
    handlers = _Handlers(api)
    app[API_KEY] = api
    app[STREAMING_KEY] = handlers.streaming
    app.on_shutdown.append(handlers.on_shutdown)
    app.cleanup_ctx.append(functools.partial(_post_start_loops, api))
    app.router.add_route("*", "/{tail:.*}", handlers.dispatch)
    return app
