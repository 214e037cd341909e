"""kube-sim's OpenAPI: ``/openapi/v2`` (swagger 2.0) and ``/openapi/v3`` (3.0, one document per group-version).

Both are built from kube-sim's one schema of the API's types (:mod:`.schemas`) and its resource table
(:mod:`.paths`), as kube-apiserver's handlers serve them (k8s.io/kube-openapi handler and handler3):

- ``/openapi/v3`` lists every group-version (``api/v1``, ``apis/apps/v1``), the group documents (``apis/apps``),
  ``api``, ``apis`` and ``version``, each with ``serverRelativeURL`` ``/openapi/v3/<path>?hash=<ETag>``.
- A document's ETag is the SHA-512 of its JSON, upper-case hex. Asked with the current ``?hash=``, the answer
  is ``Cache-Control: public, immutable`` with an ``Expires`` a year out; with a stale hash, a 301 to the current
  URL. ``If-None-Match`` with the ETag answers 304.
- ``/openapi/v2`` answers JSON when the ``Accept`` list allows it (``application/json``, ``*/*``), the
  gnostic protobuf form when that comes first, 406 otherwise; gzip-compressed for a client that accepts it
  (upstream wraps this handler in a gzip handler).
- Documents are built on first request and kept for the process (per resource table and version); the
  time each build took is logged.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import orjson
from aiohttp import web

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors, schema
from controller_manager.sim.apiserver.crd import openapi as crd_openapi
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.openapi import paths, schemas, v2proto

__all__ = ["Documents", "documents", "respond"]

Obj = dict[str, Any]
_log = logging.getLogger(__name__)

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_V2_PROTOBUF_SUBTYPES = ("com.github.proto-openapi.spec.v2@v1.0+protobuf",
                         "com.github.proto-openapi.spec.v2.v1.0+protobuf")
_SECURITY = {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}}


@dataclass(slots=True)
class Built:
    """One document's bytes and ETag (SHA-512 of the JSON, upper-case hex, as kube-openapi computes it)."""

    body: bytes
    etag: str
    seconds: float
    last_modified: float = field(default_factory=time.time)
    _gzipped: bytes | None = None

    def gzipped(self) -> bytes:
        if self._gzipped is None:
            self._gzipped = gzip.compress(self.body, compresslevel=6, mtime=0)
        return self._gzipped


def _built(doc: Obj, started: float) -> Built:
    body = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)  # Go writes maps sorted by key
    return Built(body, hashlib.sha512(body).hexdigest().upper(), time.perf_counter() - started)


def _gvks(resources: tuple[Resource, ...], scope: tuple[str, str] | None) -> dict[str, list[Obj]]:
    """Type name -> its group-version-kinds. The meta types every group registers (DeleteOptions, WatchEvent)
    list every served group-version in v2; a v3 group-version document keeps the core one and its own."""
    out: dict[str, list[Obj]] = {}
    for api_version_kind, name in schema.kinds().items():
        api_version, _, kind = api_version_kind.rpartition("/")
        group, _, version = api_version.rpartition("/")
        out.setdefault(name, []).append({"group": group, "kind": kind, "version": version})
    for kind in schemas.CORE_META_KINDS:
        out[_META + kind] = [{"group": "", "kind": kind, "version": "v1"}]
    gvs = sorted({(r.group, r.version) for r in resources} | {("", "v1")})
    if scope is not None:
        gvs = [gv for gv in gvs if gv in (("", "v1"), scope)]
    for kind in schemas.CROSS_REGISTERED:
        out[_META + kind] = [{"group": g, "kind": kind, "version": v} for g, v in gvs]
    return {name: sorted(v, key=lambda x: (x["group"], x["version"], x["kind"])) for name, v in out.items()}


def _v3_document(components: Obj, path_items: Obj, git_version: str) -> Obj:
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": git_version}, "paths": path_items,
            "components": {"schemas": components, "securitySchemes": _SECURITY}}


def _discovery_document(resources: tuple[Resource, ...], name: str, git_version: str) -> Obj | None:
    """The document of one discovery path: ``api``, ``apis``, ``apis/<group>`` or ``version``; None for others."""
    plain: tuple[str, ...] = paths.PLAIN_TYPES
    if name == "api":
        path, op_id, tag, ref = "/api/", "getCoreAPIVersions", "core", _META + "APIVersions"
        description = "get available API versions"
    elif name == "apis":
        path, op_id, tag, ref = "/apis/", "getAPIVersions", "apis", _META + "APIGroupList"
        description = "get available API versions"
    elif name == "version":
        path, op_id, tag, ref = "/version/", "getCodeVersion", "version", "io.k8s.apimachinery.pkg.version.Info"
        description = "get the version information for this server"
        plain = ("application/json",)
    elif name.startswith("apis/") and name.count("/") == 1 and any(r.group == name[5:] for r in resources):
        camel = paths.camel_group(name[5:])
        path, op_id, tag, ref = f"/{name}/", f"get{camel}APIGroup", camel[:1].lower() + camel[1:], _META + "APIGroup"
        description = "get information of a group"
    else:
        return None
    item = {"get": {"description": description, "operationId": op_id, "tags": [tag],
                    "responses": {"200": {"description": "OK", "content": paths.content(ref, plain)},
                                  "401": {"description": "Unauthorized"}}}}
    return _v3_document(schemas.definitions({ref}, 3, _gvks(resources, None)), {path: item}, git_version)


class Documents:
    """The OpenAPI documents of one resource table, each built on first use and kept: the v3 documents by
    name (``apis/apps/v1``), the v3 discovery (which builds them all, for their hashes), v2 and its protobuf."""

    def __init__(self, resources: tuple[Resource, ...], git_version: str) -> None:
        self.resources = resources
        self.git_version = git_version
        self._v3: dict[str, Built] = {}
        self._v3_discovery: Built | None = None
        self._v2: Built | None = None
        self._v2_proto: Built | None = None
        self.group_versions = sorted({paths.gv_path(r.group, r.version): (r.group, r.version)
                                      for r in resources}.items())

    def v3(self, name: str) -> Built | None:
        """The v3 document at ``/openapi/v3/<name>``, or None."""
        built = self._v3.get(name)
        if built is not None:
            return built
        started = time.perf_counter()
        gv = dict(self.group_versions).get(name)
        if gv is not None:
            items = paths.group_version_paths(self.resources, *gv)
            doc = _v3_document(schemas.definitions(schemas.references(items), 3, _gvks(self.resources, gv),
                                                   crd_openapi.definitions(self.resources, 3)), items, self.git_version)
        else:
            found = _discovery_document(self.resources, name, self.git_version)
            if found is None:
                return None
            doc = found
        built = self._v3[name] = _built(doc, started)
        _log.info("built OpenAPI v3 document %s in %.1f ms (%d bytes)", name, built.seconds * 1000, len(built.body))
        return built

    def built(self) -> list[str]:
        """The documents built so far: v3 names, and ``v2`` once the swagger document is."""
        return sorted(self._v3) + (["v2"] if self._v2 is not None else [])

    def names(self) -> list[str]:
        """Every v3 document's name, as the discovery lists them."""
        return sorted([*self.discovery_names(), *(name for name, _ in self.group_versions)])

    def v3_discovery(self) -> Built:
        if self._v3_discovery is None:
            started = time.perf_counter()
            listed: Obj = {}
            for name in self.names():
                built = self.v3(name)
                assert built is not None
                listed[name] = {"serverRelativeURL": f"/openapi/v3/{name}?hash={built.etag}"}
            self._v3_discovery = _built({"paths": listed}, started)
        return self._v3_discovery

    def discovery_names(self) -> list[str]:
        groups = sorted({r.group for r in self.resources if r.group})
        return ["api", "apis", *(f"apis/{g}" for g in groups), "version"]

    def v2(self) -> Built:
        """The swagger document: every route of the v3 documents (discovery paths included) in one."""
        if self._v2 is None:
            started = time.perf_counter()
            items: Obj = {}
            for _, (group, version) in self.group_versions:
                items.update(paths.group_version_paths(self.resources, group, version))
            for name in self.discovery_names():
                found = _discovery_document(self.resources, name, self.git_version)
                assert found is not None
                items.update(found["paths"])
            items = {path: paths.to_v2(item) for path, item in sorted(items.items())}
            doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": self.git_version}, "paths": items,
                   "definitions": schemas.definitions(schemas.references(items), 2, _gvks(self.resources, None),
                                                      crd_openapi.definitions(self.resources, 2)),
                   "securityDefinitions": _SECURITY, "security": [{"BearerToken": []}]}
            self._v2 = _built(doc, started)
            _log.info("built OpenAPI v2 document in %.1f ms (%d bytes)", self._v2.seconds * 1000, len(self._v2.body))
        return self._v2

    def v2_proto(self) -> Built:
        """The v2 document in protobuf; its ETag is the JSON's, as upstream's."""
        if self._v2_proto is None:
            json_form = self.v2()
            started = time.perf_counter()
            body = v2proto.document(orjson.loads(json_form.body))
            self._v2_proto = Built(body, json_form.etag, time.perf_counter() - started, json_form.last_modified)
            _log.info("encoded OpenAPI v2 protobuf in %.1f ms (%d bytes)", self._v2_proto.seconds * 1000, len(body))
        return self._v2_proto


_DOCUMENTS: dict[tuple[tuple[Resource, ...], str, bytes], Documents] = {}


def documents(resources: tuple[Resource, ...], git_version: str) -> Documents:
    """The process's documents for a resource table and version (built lazily, kept). Only kinds of the
    schema and custom resources are published: not the CustomResourceDefinition kind (the schema lacks
    apiextensions' types) nor the metrics API (its server publishes its own documents). A custom resource's
    schema is part of the key, as its equality leaves it out."""
    resources = tuple(r for r in resources
                      if isinstance(r, CustomResource) or schema.kind(r.api_version, r.kind) is not None)
    key = (resources, git_version, orjson.dumps([r.schema for r in resources if isinstance(r, CustomResource)]))
    found = _DOCUMENTS.get(key)
    if found is None:
        found = _DOCUMENTS[key] = Documents(resources, git_version)
    return found


def _accept(header: str) -> list[tuple[str, str]]:
    """The Accept header's media ranges, most preferred first (goautoneg's order: q, then specificity)."""
    ranges: list[tuple[float, int, int, str, str]] = []
    for i, part in enumerate((header or "*/*").split(",")):
        fields = [f.strip() for f in part.split(";")]
        mime = fields[0].lower()
        if not mime:
            continue
        q = 1.0
        for p in fields[1:]:
            if p.startswith("q="):
                try:
                    q = float(p[2:])
                except ValueError:
                    q = 0.0
        main, _, sub = mime.partition("/")
        specificity = 0 if main == "*" else 1 if sub == "*" else 2
        ranges.append((-q, -specificity, i, main, sub or "*"))
    return [(main, sub) for q, _s, _i, main, sub in sorted(ranges) if q < 0]


def _negotiate(header: str, subtypes: tuple[str, ...]) -> str | None:
    """The first of ``subtypes`` (of ``application/``) the Accept list allows, in the client's order."""
    for main, sub in _accept(header):
        if main not in ("application", "*"):
            continue
        for candidate in subtypes:
            if sub in (candidate, "*"):
                return candidate
    return None


def _serve(request: web.Request, built: Built, content_type: str, *, compress: bool = False) -> web.Response:
    """http.ServeContent's part that matters here: ETag, Last-Modified, and 304 for a matching If-None-Match."""
    quoted = f'"{built.etag}"'
    headers = {"Etag": quoted, "Content-Type": content_type, "Vary": "Accept",
               "Last-Modified": formatdate(built.last_modified, usegmt=True)}
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        fresh = inm.strip() == "*" or quoted in [t.strip().removeprefix("W/") for t in inm.split(",")]
    else:  # If-Modified-Since counts only without If-None-Match, at one-second precision
        since = request.if_modified_since
        fresh = since is not None and int(built.last_modified) <= since.timestamp()
    if fresh:
        return web.Response(status=304, headers={k: v for k, v in headers.items() if k != "Content-Type"})
    body = built.body
    if compress:
        headers["Vary"] = "Accept, Accept-Encoding"
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body = built.gzipped()
            headers["Content-Encoding"] = "gzip"
    return web.Response(body=body if request.method != "HEAD" else b"", status=200, headers=headers)


def respond(request: web.Request, resources: tuple[Resource, ...], git_version: str) -> web.StreamResponse:
    """Answer a GET of ``/openapi/v2``, ``/openapi/v3`` or ``/openapi/v3/<path>``."""
    docs = documents(resources, git_version)
    path = request.path.rstrip("/")
    accept = request.headers.get("Accept", "")
    if path == "/openapi/v2":
        chosen = _negotiate(accept, ("json", *_V2_PROTOBUF_SUBTYPES))
        if chosen is None:
            return web.Response(status=406, headers={"Vary": "Accept"})
        if chosen == "json":
            return _serve(request, docs.v2(), "application/json", compress=True)
        return _serve(request, docs.v2_proto(), V2_PROTOBUF, compress=True)
    if path == "/openapi/v3":
        return _serve(request, docs.v3_discovery(), "application/json")
    name = path.removeprefix("/openapi/v3/")
    found = docs.v3(name)
    if found is None:
        raise errors.path_not_found()
    if _negotiate(accept, ("json",)) is None:
        # The v3 protobuf form is not served: a client listing only it is told so.
        return web.Response(status=406, headers={"Vary": "Accept"})
    wanted = request.query.get("hash")
    if wanted is not None and wanted != "":
        if wanted != found.etag:
            raise web.HTTPMovedPermanently(f"/openapi/v3/{name}?hash={found.etag}")
        resp = _serve(request, found, "application/json")
        resp.headers["Cache-Control"] = "public, immutable"
        resp.headers["Expires"] = formatdate(time.time() + 365 * 24 * 3600, usegmt=True)
        return resp
    return _serve(request, found, "application/json")
