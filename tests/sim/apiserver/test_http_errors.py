"""Error shapes and codes of the HTTP face, authentication, authorization and discovery."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.apiserver.conftest import VIEWER, Client, configmap

CM_URL = "/api/v1/namespaces/default/configmaps"
GENERIC_404 = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "the server could not find the requested resource", "reason": "NotFound", "details": {},
               "code": 404}


@pytest.mark.parametrize("path", [
    pytest.param("/api/v1/widgets", id="unknown-resource"),
    pytest.param("/apis/nope.example.com/v1/things", id="unknown-group"),
    pytest.param("/api/v1/namespaces/default/pods/p/unknownsub", id="unknown-subresource"),
    pytest.param("/nonsense", id="unknown-path"),
])
async def test_unknown_paths_are_404(client: Client, path: str) -> None:
    code, body = await client.get(path)
    assert code == 404
    assert body == GENERIC_404


async def test_malformed_json_is_400(client: Client) -> None:
    code, body = await client.call("POST", CM_URL, raw=b"{not json")
    assert code == 400
    assert body["reason"] == "BadRequest"
    assert body["message"].startswith("couldn't get version/kind; json parse error")


@pytest.mark.parametrize(("method", "content_type", "accepted"), [
    # CBOR serving is behind a feature gate that 1.37 leaves off: not a body type kube-apiserver reads.
    pytest.param("POST", "application/cbor", "application/json, application/yaml, application/vnd.kubernetes.protobuf",
                 id="cbor-create"),
    pytest.param("PATCH", "application/json", "application/json-patch+json, application/merge-patch+json, "
                 "application/strategic-merge-patch+json, application/apply-patch+yaml", id="plain-json-patch"),
])
async def test_unsupported_body_is_415(client: Client, method: str, content_type: str, accepted: str) -> None:
    await client.post(CM_URL, configmap("cm"))
    path = CM_URL if method == "POST" else f"{CM_URL}/cm"
    code, body = await client.call(method, path, raw=b"{}", headers={"Content-Type": content_type})
    assert code == 415
    assert body["reason"] == "UnsupportedMediaType"
    assert body["message"] == f"the body of the request was in an unknown format - accepted media types include: " \
                              f"{accepted}"


@pytest.mark.parametrize("accept", ["application/cbor", "text/plain"])
async def test_unservable_accept_is_406(client: Client, accept: str) -> None:
    code, body = await client.get(CM_URL, headers={"Accept": accept})
    assert code == 406
    assert body["reason"] == "NotAcceptable"
    assert body["message"] == "only the following media types are accepted: application/json, application/yaml, " \
                              "application/vnd.kubernetes.protobuf"


@pytest.mark.parametrize(("method", "path"), [
    pytest.param("PUT", CM_URL, id="put-collection"),
    pytest.param("DELETE", "/apis/authentication.k8s.io/v1/tokenreviews/x", id="delete-tokenreview"),
    pytest.param("POST", f"{CM_URL}/cm", id="post-named"),
])
async def test_wrong_method_is_405(client: Client, method: str, path: str) -> None:
    code, body = await client.call(method, path, raw=b"{}")
    assert code == 405
    assert body["reason"] == "MethodNotAllowed"
    assert body["message"] == "the server does not allow this method on the requested resource"


async def test_invalid_object_is_422(client: Client) -> None:
    code, body = await client.post(CM_URL, {"metadata": {}})
    assert code == 422
    assert body["reason"] == "Invalid"
    assert body["kind"] == "Status"


@pytest.mark.parametrize("headers", [
    pytest.param({"Authorization": "Bearer wrong"}, id="unknown-token"),
    pytest.param({"Authorization": "Basic abc"}, id="not-bearer"),
])
async def test_bad_credentials_are_401(client: Client, headers: dict[str, str]) -> None:
    code, body = await client.get(CM_URL, headers=headers)
    assert code == 401
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


async def test_viewer_reads_but_cannot_write(client: Client) -> None:
    await client.post(CM_URL, configmap("cm"))
    assert (await client.get(f"{CM_URL}/cm", headers=VIEWER))[0] == 200
    assert (await client.get(CM_URL, headers=VIEWER))[0] == 200
    code, body = await client.post(CM_URL, configmap("x"), headers=VIEWER)
    assert code == 403
    assert body["message"] == ('configmaps is forbidden: User "viewer" cannot create resource "configmaps" in API '
                               'group "" in the namespace "default"')
    assert body["details"] == {"kind": "configmaps"}
    code, body = await client.delete("/api/v1/nodes/n1", headers=VIEWER)
    assert body["message"] == ('nodes "n1" is forbidden: User "viewer" cannot delete resource "nodes" in API group '
                               '"" at the cluster scope')


@pytest.mark.parametrize(("headers", "path", "code"), [
    pytest.param(VIEWER, "/metrics", 403, id="viewer-metrics"),
    pytest.param(VIEWER, "/healthz", 200, id="viewer-healthz"),
    pytest.param(VIEWER, "/api", 200, id="viewer-discovery"),
    pytest.param({"Authorization": ""}, "/version", 200, id="anonymous-version"),
    pytest.param({"Authorization": ""}, "/api", 403, id="anonymous-discovery"),
    pytest.param({}, "/metrics", 200, id="admin-metrics"),
])
async def test_non_resource_authorization(client: Client, headers: dict[str, str], path: str, code: int) -> None:
    got, body = await client.get(path, headers=headers)
    assert got == code
    if code == 403:
        user = "viewer" if headers is VIEWER else "system:anonymous"
        assert body["message"] == f'forbidden: User "{user}" cannot get path "{path}"'


async def test_token_review(client: Client) -> None:
    review: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                              "spec": {"token": "viewer-token"}}
    code, body = await client.post("/apis/authentication.k8s.io/v1/tokenreviews", review)
    assert code == 201
    assert body["status"]["authenticated"] is True
    assert body["status"]["user"]["username"] == "viewer"
    _, body = await client.post("/apis/authentication.k8s.io/v1/tokenreviews", {**review, "spec": {"token": "x"}})
    assert "authenticated" not in body["status"]


@pytest.mark.parametrize(("user", "attrs", "allowed"), [
    pytest.param("admin", {"resourceAttributes": {"verb": "delete", "resource": "pods"}}, True, id="admin"),
    pytest.param("viewer", {"resourceAttributes": {"verb": "list", "resource": "pods"}}, True, id="viewer-list"),
    pytest.param("viewer", {"resourceAttributes": {"verb": "create", "resource": "pods"}}, False, id="viewer-create"),
    pytest.param("viewer", {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}, False, id="viewer-metrics"),
    pytest.param("viewer", {"nonResourceAttributes": {"verb": "get", "path": "/healthz"}}, True, id="viewer-healthz"),
])
async def test_subject_access_review(client: Client, user: str, attrs: dict[str, Any], allowed: bool) -> None:
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"user": user, **attrs}}
    code, body = await client.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
    assert code == 201
    assert body["status"]["allowed"] is allowed


async def test_discovery_documents(client: Client) -> None:
    _, version = await client.get("/version")
    assert version["gitVersion"].startswith("v1.")
    _, api = await client.get("/api")
    assert api["kind"] == "APIVersions"
    assert api["versions"] == ["v1"]
    _, core = await client.get("/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods"]["categories"] == ["all"]
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["pods/eviction"]["group"] == "policy"
    assert by_name["namespaces"]["namespaced"] is False
    _, groups = await client.get("/apis")
    names = [g["name"] for g in groups["groups"]]
    assert "apps" in names
    _, apps = await client.get("/apis/apps/v1")
    scale = {r["name"]: r for r in apps["resources"]}["deployments/scale"]
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    _, group = await client.get("/apis/apps")
    assert group["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}


async def test_aggregated_discovery_when_asked(client: Client) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    resp = await client.tc.get("/apis", headers={"Accept": accept, "Authorization": "Bearer admin-token"})
    assert resp.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    body = await resp.json(content_type=None)
    apps = next(i for i in body["items"] if i["metadata"]["name"] == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deploy["scope"] == "Namespaced"
    assert {s["subresource"] for s in deploy["subresources"]} == {"status", "scale"}


async def test_table_list(client: Client) -> None:
    await client.post("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"},
                                                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
    _, table = await client.get("/api/v1/namespaces/default/pods",
                                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert table["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", "0"]  # RESTARTS is text: "4 (90s ago)"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
