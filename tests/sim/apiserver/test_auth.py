"""Authentication and RBAC as a client sees them over HTTP: the bootstrap policy, aggregation, the review kinds,
TokenRequest and ServiceAccount tokens, impersonation, and the authorizer deciding from stored bindings."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServerOptions
from controller_manager.sim.apiserver.auth import bootstrap, escalation
from controller_manager.sim.apiserver.auth.rbac import Attributes, rule_allows
from controller_manager.sim.apiserver.auth.users import User
from tests.packaging.test_rbac import UPSTREAM, permissions
from tests.sim.apiserver.conftest import ADMIN_TOKEN, VIEWER, VIEWER_TOKEN, Client, pod

RBAC = "/apis/rbac.authorization.k8s.io/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"
AUTHN = "/apis/authentication.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
SA_USER = "system:serviceaccount:default:robot"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def claims_of(token: str) -> Any:
    body = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


async def robot_token(client: Client, **spec: Any) -> tuple[str, dict[str, Any]]:
    code, _ = await client.post("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    assert code in (201, 409)
    code, body = await client.post("/api/v1/namespaces/default/serviceaccounts/robot/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    assert code == 201, body
    return body["status"]["token"], body


async def grant(client: Client, verbs: list[str], resources: list[str], *, names: list[str] | None = None,
                subject: dict[str, Any] | None = None) -> None:
    rule: dict[str, Any] = {"apiGroups": [""], "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    code, body = await client.post(f"{RBAC}/namespaces/default/roles", {"metadata": {"name": "r"}, "rules": [rule]})
    assert code == 201, body
    subject = subject or {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}
    code, body = await client.post(f"{RBAC}/namespaces/default/rolebindings", {
        "metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        "subjects": [subject]})
    assert code == 201, body


# --- the bootstrap policy ------------------------------------------------------------------------------


async def test_bootstrap_roles_and_bindings_exist_labelled(client: Client) -> None:
    code, role = await client.get(f"{RBAC}/clusterroles/cluster-admin")
    assert code == 200
    assert role["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults"}
    assert role["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    assert role["rules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                             {"verbs": ["*"], "nonResourceURLs": ["*"]}]
    _, binding = await client.get(f"{RBAC}/clusterrolebindings/cluster-admin")
    assert binding["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": "system:masters"}]
    _, roles = await client.get(f"{RBAC}/clusterroles")
    names = {r["metadata"]["name"] for r in roles["items"]}
    assert {"admin", "edit", "view", "system:basic-user", "system:discovery", "system:public-info-viewer",
            "system:kube-controller-manager", "system:kube-scheduler", "system:node",
            "system:controller:job-controller", "system:controller:namespace-controller",
            "system:controller:generic-garbage-collector"} <= names
    _, job = await client.get(f"{RBAC}/clusterrolebindings/system:controller:job-controller")
    assert job["subjects"] == [{"kind": "ServiceAccount", "name": "job-controller", "namespace": "kube-system"}]


async def test_admin_edit_view_are_aggregated(client: Client) -> None:
    _, view = await client.get(f"{RBAC}/clusterroles/view")
    _, edit = await client.get(f"{RBAC}/clusterroles/edit")
    _, admin = await client.get(f"{RBAC}/clusterroles/admin")
    assert view["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert view["rules"]
    assert all(r in edit["rules"] for r in view["rules"])
    assert all(r in admin["rules"] for r in edit["rules"])
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["localsubjectaccessreviews"]} in admin["rules"]


async def test_a_labelled_cluster_role_is_aggregated_and_removed_again(client: Client) -> None:
    extra = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}
    code, _ = await client.post(f"{RBAC}/clusterroles", {
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [extra]})
    assert code == 201
    for name in ("view", "edit", "admin"):
        _, role = await client.get(f"{RBAC}/clusterroles/{name}")
        assert {"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]} in role["rules"], name
    await client.delete(f"{RBAC}/clusterroles/widgets-view")
    _, admin = await client.get(f"{RBAC}/clusterroles/admin")
    assert not any(r.get("apiGroups") == ["example.com"] for r in admin["rules"])


NOT_AGGREGATING = ApiServerOptions(admin_token=ADMIN_TOKEN, viewer_token=VIEWER_TOKEN, aggregate_cluster_roles=False)


@pytest.mark.parametrize("options", [NOT_AGGREGATING])
async def test_without_aggregation_aggregated_roles_stay_as_written(client: Client) -> None:
    """As a real kube-apiserver: admin/edit/view start empty and a labelled ClusterRole changes none of them
    (kube-controller-manager's clusterrole-aggregation-controller is what fills them)."""
    for name in ("view", "edit", "admin"):
        _, role = await client.get(f"{RBAC}/clusterroles/{name}")
        assert role["aggregationRule"]["clusterRoleSelectors"], name
        assert not role.get("rules"), name
    code, _ = await client.post(f"{RBAC}/clusterroles", {
        "metadata": {"name": "widgets-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]})
    assert code == 201
    _, view = await client.get(f"{RBAC}/clusterroles/view")
    assert not view.get("rules")


# --- reviews ---------------------------------------------------------------------------------------------


async def test_self_subject_access_review_for_the_viewer(client: Client) -> None:
    ssar: dict[str, Any] = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list",
                                                            "resource": "pods"}}}
    code, body = await client.post(f"{AUTHZ}/selfsubjectaccessreviews", ssar, headers=VIEWER)
    assert code == 201
    assert body["kind"] == "SelfSubjectAccessReview"
    assert body["spec"] == ssar["spec"]
    assert body["status"] == {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "kube-sim:viewer" of '
                                                         'ClusterRole "kube-sim:viewer" to User "viewer"'}
    ssar["spec"]["resourceAttributes"]["verb"] = "create"
    _, body = await client.post(f"{AUTHZ}/selfsubjectaccessreviews", ssar, headers=VIEWER)
    assert body["status"] == {"allowed": False}
    _, body = await client.post(f"{AUTHZ}/selfsubjectaccessreviews", ssar)
    assert body["status"] == {"allowed": True}  # system:masters: the superuser authorizer gives no reason


async def test_reviews_are_validated(client: Client) -> None:
    code, body = await client.post(f"{AUTHZ}/selfsubjectaccessreviews",
                                   {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                    "spec": {}})
    assert code == 422
    assert body["message"] == ('SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
                               'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes '
                               "must be specified")
    code, body = await client.post(f"{AUTHZ}/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {"name": "x"},
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
    assert code == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.user", "metadata"]
    assert "spec.user: Invalid value: \"\": at least one of user or group must be specified" in body["message"]


async def test_local_subject_access_review(client: Client) -> None:
    await robot_token(client)
    await grant(client, ["get", "list"], ["pods"])
    lsar = {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "spec": {"user": SA_USER, "groups": ["system:serviceaccounts"],
                     "resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}}
    code, body = await client.post(f"{AUTHZ}/namespaces/default/localsubjectaccessreviews", lsar)
    assert code == 201
    assert body["metadata"]["namespace"] == "default"
    assert body["status"] == {"allowed": True, "reason": 'RBAC: allowed by RoleBinding "rb/default" of Role "r" to '
                                                         'ServiceAccount "robot/default"'}
    code, body = await client.post(f"{AUTHZ}/namespaces/kube-system/localsubjectaccessreviews", lsar)
    assert code == 422
    assert body["message"] == ('LocalSubjectAccessReview.authorization.k8s.io "" is invalid: '
                               'spec.resourceAttributes.namespace: Invalid value: "default": must match '
                               "metadata.namespace")
    code, body = await client.post(f"{AUTHZ}/namespaces/default/localsubjectaccessreviews",
                                   {**lsar, "metadata": {"namespace": "kube-system"}})
    assert code == 400


async def test_self_subject_rules_review(client: Client) -> None:
    token, _ = await robot_token(client)
    await grant(client, ["get", "list"], ["pods"])
    ssrr = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "default"}}
    code, body = await client.post(f"{AUTHZ}/selfsubjectrulesreviews", ssrr, headers=bearer(token))
    assert code == 201
    status = body["status"]
    assert status["incomplete"] is False
    assert {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]} in status["resourceRules"]
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in status["resourceRules"]
    assert {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]} \
        in status["nonResourceRules"]
    _, body = await client.post(f"{AUTHZ}/selfsubjectrulesreviews", {**ssrr, "spec": {"namespace": "kube-public"}},
                                headers=bearer(token))
    assert not any(r["resources"] == ["pods"] for r in body["status"]["resourceRules"])


async def test_self_subject_review(client: Client, clock: FakeClock) -> None:
    ssr = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    code, body = await client.post(f"{AUTHN}/selfsubjectreviews", ssr, headers=VIEWER)
    assert code == 201
    assert body["status"] == {"userInfo": {"username": "viewer", "uid": "viewer-uid",
                                           "groups": ["system:authenticated"]}}
    assert body["metadata"]["creationTimestamp"]


async def test_review_kinds_are_create_only_in_discovery(client: Client) -> None:
    _, authz = await client.get(AUTHZ)
    verbs = {r["name"]: r["verbs"] for r in authz["resources"]}
    assert verbs == {"subjectaccessreviews": ["create"], "selfsubjectaccessreviews": ["create"],
                     "localsubjectaccessreviews": ["create"], "selfsubjectrulesreviews": ["create"]}
    _, authn = await client.get(AUTHN)
    assert {r["name"] for r in authn["resources"]} == {"tokenreviews", "selfsubjectreviews"}
    _, core = await client.get("/api/v1")
    token = next(r for r in core["resources"] if r["name"] == "serviceaccounts/token")
    assert token == {"name": "serviceaccounts/token", "singularName": "", "namespaced": True,
                     "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}


# --- TokenRequest and ServiceAccount tokens -----------------------------------------------------------


async def test_token_request_answers_a_signed_token_with_the_real_claims(client: Client, clock: FakeClock) -> None:
    token, body = await robot_token(client)
    _, sa = await client.get("/api/v1/namespaces/default/serviceaccounts/robot")
    assert body["kind"] == "TokenRequest"
    assert body["apiVersion"] == "authentication.k8s.io/v1"
    assert body["metadata"] == {"namespace": "default", "creationTimestamp": None}  # the request, answered
    assert body["spec"] == {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3600}
    now = int(clock.now())
    claims = claims_of(token)
    assert claims["iss"] == "https://kubernetes.default.svc.cluster.local"
    assert claims["sub"] == SA_USER
    assert claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    assert claims["iat"] == claims["nbf"] == now
    assert claims["exp"] == now + 3600
    assert claims["kubernetes.io"] == {"namespace": "default",
                                       "serviceaccount": {"name": "robot", "uid": sa["metadata"]["uid"]}}
    header = orjson.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["alg"] == "ES256"
    assert header["kid"]
    expires = body["status"]["expirationTimestamp"]
    assert expires.endswith("Z")


async def test_token_bound_to_a_pod_carries_pod_and_node(client: Client) -> None:
    await client.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
    _, created = await client.post(PODS, pod("p", node="n1", serviceAccountName="robot"))
    _, body = await robot_token(client, boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"},
                                expirationSeconds=7200, audiences=["api", "vault"])
    claims = claims_of(body["status"]["token"])
    assert claims["aud"] == ["api", "vault"]
    assert claims["exp"] - claims["iat"] == 7200
    assert claims["kubernetes.io"]["pod"] == {"name": "p", "uid": created["metadata"]["uid"]}
    assert claims["kubernetes.io"]["node"]["name"] == "n1"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": body["status"]["token"], "audiences": ["vault"]}}
    _, answer = await client.post(f"{AUTHN}/tokenreviews", review)
    assert answer["status"]["authenticated"] is True
    assert answer["status"]["audiences"] == ["vault"]
    extra = answer["status"]["user"]["extra"]
    assert extra["authentication.kubernetes.io/pod-name"] == ["p"]
    assert extra["authentication.kubernetes.io/node-name"] == ["n1"]
    assert extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    await client.delete(f"{PODS}/p", {"gracePeriodSeconds": 0})
    _, answer = await client.post(f"{AUTHN}/tokenreviews", review)
    assert "authenticated" not in answer["status"]


@pytest.mark.parametrize(("seconds", "message"), [
    (599, "may not specify a duration less than 10 minutes"),
    (2**32 + 1, "may not specify a duration larger than 2^32 seconds"),
])
async def test_token_request_expiration_bounds(client: Client, seconds: int, message: str) -> None:
    await client.post("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    code, body = await client.post("/api/v1/namespaces/default/serviceaccounts/robot/token",
                                   {"spec": {"expirationSeconds": seconds}})
    assert code == 422
    assert message in body["message"]


@pytest.mark.parametrize(("ref", "code", "message"), [
    ({"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}, 400,
     "cannot bind token to object of type /v1, Kind=ConfigMap"),
    ({"kind": "Pod", "apiVersion": "v1", "name": "ghost"}, 404, 'pods "ghost" not found'),
    ({"kind": "Pod", "apiVersion": "v1", "name": "other"}, 400,
     'cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.'),
    ({"kind": "Pod", "apiVersion": "v1", "name": "mine", "uid": "stale"}, 409,
     'Operation cannot be fulfilled on Pod "mine": the UID in the bound object reference (stale) does not match the '
     "UID in record. The object might have been deleted and then recreated"),
])
async def test_token_request_bound_object_errors(client: Client, ref: dict[str, str], code: int,
                                                 message: str) -> None:
    await client.post("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    await client.post(PODS, pod("other"))
    await client.post(PODS, pod("mine", serviceAccountName="robot"))
    got, body = await client.post("/api/v1/namespaces/default/serviceaccounts/robot/token",
                                  {"spec": {"boundObjectRef": ref}})
    assert (got, body["message"]) == (code, message)


async def test_token_request_for_a_missing_service_account_is_404(client: Client) -> None:
    code, body = await client.post("/api/v1/namespaces/default/serviceaccounts/ghost/token", {"spec": {}})
    assert code == 404
    assert body["message"] == 'serviceaccounts "ghost" not found'


async def test_token_review_of_a_service_account_token(client: Client) -> None:
    token, _ = await robot_token(client)
    _, sa = await client.get("/api/v1/namespaces/default/serviceaccounts/robot")
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    code, body = await client.post(f"{AUTHN}/tokenreviews", review)
    assert code == 201
    user = body["status"]["user"]
    assert body["status"]["authenticated"] is True
    assert user["username"] == SA_USER
    assert user["uid"] == sa["metadata"]["uid"]
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    _, body = await client.post(f"{AUTHN}/tokenreviews", {**review, "spec": {"token": token, "audiences": ["x"]}})
    assert "authenticated" not in body["status"]


async def test_service_account_token_decides_through_rbac(client: Client) -> None:
    token, _ = await robot_token(client)
    await client.post(PODS, pod("p"))
    code, body = await client.get(PODS, headers=bearer(token))
    assert code == 403
    assert body["message"] == (f'pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API group "" '
                               'in the namespace "default"')
    await grant(client, ["get", "list", "watch"], ["pods"])
    code, body = await client.get(PODS, headers=bearer(token))
    assert code == 200
    assert [p["metadata"]["name"] for p in body["items"]] == ["p"]
    code, body = await client.delete(f"{PODS}/p", headers=bearer(token))
    assert code == 403
    assert body["message"] == (f'pods "p" is forbidden: User "{SA_USER}" cannot delete resource "pods" in API '
                               'group "" in the namespace "default"')
    code, _ = await client.get("/api/v1/namespaces/kube-system/pods", headers=bearer(token))
    assert code == 403
    await client.delete(f"{RBAC}/namespaces/default/rolebindings/rb")
    code, _ = await client.get(PODS, headers=bearer(token))
    assert code == 403


async def test_expired_and_revoked_tokens_are_401(client: Client, clock: FakeClock) -> None:
    token, _ = await robot_token(client, expirationSeconds=600)
    assert (await client.get("/api", headers=bearer(token)))[0] == 200
    clock.advance(601)
    assert (await client.get("/api", headers=bearer(token)))[0] == 401
    token, _ = await robot_token(client)
    await client.delete("/api/v1/namespaces/default/serviceaccounts/robot")
    await client.post("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "robot"}})
    code, body = await client.get("/api", headers=bearer(token))  # same name, new uid: the old token is dead
    assert code == 401
    assert body["reason"] == "Unauthorized"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    _, body = await client.post(f"{AUTHN}/tokenreviews", review)
    assert body["status"]["error"].startswith("[invalid bearer token, service account UID (")


async def test_service_account_issuer_discovery_verifies_tokens(client: Client) -> None:
    token, _ = await robot_token(client)
    token_auth = bearer(token)
    code, config = await client.get("/.well-known/openid-configuration", headers=token_auth)
    assert code == 200
    assert config["issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert config["jwks_uri"].endswith("/openid/v1/jwks")
    assert config["id_token_signing_alg_values_supported"] == ["ES256"]
    code, jwks = await client.get("/openid/v1/jwks", headers=token_auth)
    assert code == 200
    key = jwks["keys"][0]
    header = orjson.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert (key["kty"], key["crv"], key["alg"], key["kid"]) == ("EC", "P-256", "ES256", header["kid"])

    def number(text: str) -> int:
        return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")

    public = ec.EllipticCurvePublicNumbers(number(key["x"]), number(key["y"]), ec.SECP256R1()).public_key()
    signed, _, signature = token.rpartition(".")
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, signed.encode(), ec.ECDSA(hashes.SHA256()))  # raises if the signature is not the key's
    assert (await client.get("/openid/v1/jwks", headers={"Authorization": ""}))[0] == 403  # anonymous


async def test_a_forged_token_is_401(client: Client) -> None:
    token, _ = await robot_token(client)
    head, _body, sig = token.split(".")
    claims = claims_of(token)
    claims["sub"] = "system:serviceaccount:kube-system:admin"
    forged = base64.urlsafe_b64encode(orjson.dumps(claims)).decode().rstrip("=")
    assert (await client.get("/api", headers=bearer(f"{head}.{forged}.{sig}")))[0] == 401


# --- the authorizer ----------------------------------------------------------------------------------------


async def test_resource_names_and_subresources(client: Client) -> None:
    token, _ = await robot_token(client)
    await client.post(PODS, pod("a"))
    await client.post(PODS, pod("b"))
    await grant(client, ["get"], ["pods/status"], names=["a"])
    assert (await client.get(f"{PODS}/a/status", headers=bearer(token)))[0] == 200
    code, body = await client.get(f"{PODS}/b/status", headers=bearer(token))
    assert code == 403
    assert body["message"] == (f'pods "b" is forbidden: User "{SA_USER}" cannot get resource "pods/status" in API '
                               'group "" in the namespace "default"')
    assert (await client.get(f"{PODS}/a", headers=bearer(token)))[0] == 403


async def test_a_binding_to_a_missing_role_says_so(client: Client) -> None:
    token, _ = await robot_token(client)
    await client.post(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "dangling"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nope"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts"}]})
    code, body = await client.get(PODS, headers=bearer(token))
    assert code == 403
    assert body["message"].endswith(': RBAC: clusterrole.rbac.authorization.k8s.io "nope" not found')


async def test_non_resource_urls_by_group(client: Client) -> None:
    token, _ = await robot_token(client)
    assert (await client.get("/metrics", headers=bearer(token)))[0] == 403
    await client.post(f"{RBAC}/clusterroles", {"metadata": {"name": "metrics"},
                                                "rules": [{"nonResourceURLs": ["/metrics*"], "verbs": ["get"]}]})
    await client.post(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                      "name": "system:serviceaccounts:default"}]})
    assert (await client.get("/metrics", headers=bearer(token)))[0] == 200


async def test_a_path_is_authorized_for_its_method(client: Client) -> None:
    code, body = await client.post("/api", {}, headers=VIEWER)
    assert code == 403
    assert body["message"] == 'forbidden: User "viewer" cannot post path "/api"'


async def test_anonymous_may_read_only_public_info(client: Client) -> None:
    anonymous = {"Authorization": ""}
    assert (await client.get("/version", headers=anonymous))[0] == 200
    code, body = await client.post(f"{AUTHN}/selfsubjectreviews", {"kind": "SelfSubjectReview",
                                                                    "apiVersion": "authentication.k8s.io/v1"},
                                   headers=anonymous)
    assert code == 403
    assert body["message"] == ('selfsubjectreviews.authentication.k8s.io is forbidden: User "system:anonymous" '
                               'cannot create resource "selfsubjectreviews" in API group "authentication.k8s.io" at '
                               'the cluster scope')


# --- impersonation -----------------------------------------------------------------------------------------


async def test_the_admin_may_impersonate(client: Client) -> None:
    headers = {"Impersonate-User": "alice", "Impersonate-Group": "devs"}
    code, body = await client.post(f"{AUTHN}/selfsubjectreviews", {"kind": "SelfSubjectReview",
                                                                    "apiVersion": "authentication.k8s.io/v1"},
                                   headers=headers)
    assert code == 201
    assert body["status"]["userInfo"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    code, body = await client.get(PODS, headers=headers)
    assert code == 403
    assert 'User "alice" cannot list resource "pods"' in body["message"]


async def test_impersonating_a_service_account_adds_its_groups(client: Client) -> None:
    await robot_token(client)
    await grant(client, ["list"], ["pods"])
    code, _ = await client.get(PODS, headers={"Impersonate-User": SA_USER})
    assert code == 200


async def test_the_viewer_may_not_impersonate(client: Client) -> None:
    code, body = await client.get(PODS, headers={**VIEWER, "Impersonate-User": "alice"})
    assert code == 403
    assert body["message"] == ('users "alice" is forbidden: User "viewer" cannot impersonate resource "users" in '
                               'API group "" at the cluster scope')


async def test_impersonating_groups_without_a_user_is_400(client: Client) -> None:
    code, _ = await client.get(PODS, headers={"Impersonate-Group": "devs"})
    assert code == 400


# --- rule matching, as upstream's rbac_test tables ----------------------------------------------------------

_ALICE = User("alice", groups=("system:authenticated",))


def _res(verb: str, group: str, resource: str, subresource: str = "", name: str = "") -> Attributes:
    return Attributes(_ALICE, verb, True, group=group, resource=resource, subresource=subresource,
                      namespace="ns", name=name)


@pytest.mark.parametrize(("rule", "attrs", "allowed"), [
    ({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, _res("delete", "apps", "deployments"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _res("list", "", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _res("get", "apps", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _res("get", "", "pods", "status"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/status"]}, _res("get", "", "pods", "status"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}, _res("get", "", "nodes", "status"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}, _res("get", "", "nodes"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
     _res("get", "", "pods", name="a"), True),
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]},
     _res("list", "", "pods"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, Attributes(_ALICE, "get", False, path="/apis/apps"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis"]}, Attributes(_ALICE, "get", False, path="/apis/apps"), False),
    ({"verbs": ["*"], "nonResourceURLs": ["*"]}, Attributes(_ALICE, "post", False, path="/anything"), True),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]},
     Attributes(_ALICE, "get", False, path="/healthz"), False),
])
def test_rule_allows(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert rule_allows(attrs, rule) is allowed


# --- the bootstrap controller roles against upstream's testdata, as ported in tests/packaging/test_rbac.py --------

_UPSTREAM_ROLE_NAMES = {"daemonset-controller": "daemon-set-controller",
                        "pod-garbage-collector-controller": "pod-garbage-collector",
                        "garbage-collector-controller": "generic-garbage-collector",
                        "node-lifecycle-controller": "node-controller", "endpoints-controller": "endpoint-controller",
                        "replicationcontroller-controller": "replication-controller"}


@pytest.mark.parametrize("name", sorted(set(UPSTREAM) - {"taint-eviction-controller"}))
def test_bootstrap_controller_roles_match_upstream(name: str) -> None:
    role_name = f"system:controller:{_UPSTREAM_ROLE_NAMES.get(name, name)}"
    role = next(r for r in bootstrap.cluster_roles() if r["metadata"]["name"] == role_name)
    got = {(g, res, v) for rule in role["rules"] for g in rule["apiGroups"] if g != "extensions"
           for res in rule["resources"] for v in rule["verbs"]}
    assert got == permissions(UPSTREAM[name])


# --- escalation checks on Role and binding writes ------------------------------------------------------------

_ROBOT_GROUPS = '["system:serviceaccounts" "system:serviceaccounts:default" "system:authenticated"]'


async def test_a_role_writer_may_grant_only_what_it_holds(client: Client) -> None:
    token, _ = await robot_token(client)
    await client.post(f"{RBAC}/namespaces/default/roles", {"metadata": {"name": "writer"}, "rules": [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
         "verbs": ["create", "update", "patch", "get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    await client.post(f"{RBAC}/namespaces/default/rolebindings", {
        "metadata": {"name": "writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})
    robot = bearer(token)
    held = {"metadata": {"name": "held"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}
    assert (await client.post(f"{RBAC}/namespaces/default/roles", held, headers=robot))[0] == 201
    more = {"metadata": {"name": "more"}, "rules": [
        {"apiGroups": ["", "apps"], "resources": ["pods", "deployments"], "verbs": ["get", "delete", "watch"]}]}
    code, body = await client.post(f"{RBAC}/namespaces/default/roles", more, headers=robot)
    assert code == 403
    assert body["message"] == (
        f'roles.rbac.authorization.k8s.io "more" is forbidden: user "{SA_USER}" (groups={_ROBOT_GROUPS}) is '
        'attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["deployments"], Verbs:["get" "delete" "watch"]}\n'
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "watch"]}\n'
        '{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "delete" "watch"]}\n'
        '{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "delete" "watch"]}')
    code, _ = await client.patch(f"{RBAC}/namespaces/default/roles/held",
                                 {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]},
                                 headers=robot)
    assert code == 403

    binding = {"metadata": {"name": "edit"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                         "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]}
    code, body = await client.post(f"{RBAC}/namespaces/default/rolebindings", binding, headers=robot)
    assert code == 403
    assert body["message"].startswith(f'rolebindings.rbac.authorization.k8s.io "edit" is forbidden: user "{SA_USER}"')
    own = {**binding, "metadata": {"name": "own"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "Role", "name": "held"}}
    assert (await client.post(f"{RBAC}/namespaces/default/rolebindings", own, headers=robot))[0] == 201

    # "bind" on the role, or "escalate" on roles, lifts the check
    await client.post(f"{RBAC}/clusterroles", {"metadata": {"name": "bind-edit"}, "rules": [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": ["edit"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}]})
    await client.post(f"{RBAC}/clusterrolebindings", {
        "metadata": {"name": "robot-binds"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "bind-edit"},
        "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}]})
    assert (await client.post(f"{RBAC}/namespaces/default/rolebindings", binding, headers=robot))[0] == 201
    assert (await client.post(f"{RBAC}/namespaces/default/roles", more, headers=robot))[0] == 201


# --- ServiceAccount admission (opt-in) -----------------------------------------------------------------------


async def test_service_account_admission() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app
    from tests.sim.apiserver.conftest import ADMIN_TOKEN

    api = ApiServer(FakeClock(), ApiServerOptions(admin_token=ADMIN_TOKEN, service_account_admission=True))
    async with TestClient(TestServer(build_app(api))) as tc:
        client = Client(tc)
        code, body = await client.post(PODS, pod("p"))
        assert code == 403
        assert body["message"] == ('pods "p" is forbidden: error looking up service account default/default: '
                                   'serviceaccount "default" not found')
        await client.post("/api/v1/namespaces/default/serviceaccounts", {
            "metadata": {"name": "default"}, "imagePullSecrets": [{"name": "registry"}]})
        body = pod("p")
        body["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
        body["spec"]["containers"].append({"name": "own", "image": "nginx", "volumeMounts": [
            {"name": "mine", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]})
        body["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
        code, created = await client.post(PODS, body)
        assert code == 201, created
        spec = created["spec"]
        assert spec["serviceAccountName"] == "default"
        assert spec["imagePullSecrets"] == [{"name": "registry"}]
        volume = spec["volumes"][1]
        assert volume["name"].startswith("kube-api-access-")
        assert len(volume["name"]) == len("kube-api-access-") + 5
        assert volume["projected"] == {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
            "defaultMode": 420}
        mount = {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        assert spec["initContainers"][0]["volumeMounts"] == [mount]
        assert spec["containers"][0]["volumeMounts"] == [mount]
        assert [m["name"] for m in spec["containers"][1]["volumeMounts"]] == ["mine"]

        body = pod("q", automountServiceAccountToken=False)
        code, created = await client.post(PODS, body)
        assert code == 201
        assert "volumes" not in created["spec"]


# --- invariant: the escalation check's coverage agrees with the authorizer ----------------------------------------

_VERBS = st.sampled_from(["get", "list", "create", "delete", "*"])
_GROUPS = st.sampled_from(["", "apps", "*"])
_RESOURCES = st.sampled_from(["pods", "pods/status", "deployments", "*/status", "*", "nodes/proxy"])
_URLS = st.sampled_from(["/healthz", "/healthz/*", "/metrics", "*", "/api*", "/apis"])
_resource_rules = st.builds(
    lambda verbs, groups, resources, names: {"verbs": verbs, "apiGroups": groups, "resources": resources,
                                             **({"resourceNames": names} if names else {})},
    st.lists(_VERBS, min_size=1, max_size=2, unique=True), st.lists(_GROUPS, min_size=1, max_size=2, unique=True),
    st.lists(_RESOURCES, min_size=1, max_size=2, unique=True),
    st.lists(st.sampled_from(["a", "b"]), max_size=2, unique=True))
_url_rules = st.builds(lambda verbs, paths: {"verbs": verbs, "nonResourceURLs": paths},
                       st.lists(_VERBS, min_size=1, max_size=2, unique=True),
                       st.lists(_URLS, min_size=1, max_size=2, unique=True))
_rules = st.lists(st.one_of(_resource_rules, _url_rules), max_size=4)


def _request_of(atom: dict[str, Any]) -> Attributes:
    if "nonResourceURLs" in atom:
        return Attributes(_ALICE, atom["verbs"][0], False, path=atom["nonResourceURLs"][0])
    resource, _, sub = atom["resources"][0].partition("/")
    return Attributes(_ALICE, atom["verbs"][0], True, group=atom["apiGroups"][0], resource=resource, subresource=sub,
                      namespace="ns", name=(atom.get("resourceNames") or [""])[0])


@given(owned=_rules, requested=_rules)
@settings(max_examples=300, deadline=None)
def test_what_a_role_may_grant_is_what_its_holder_is_allowed(owned: list[dict[str, Any]],
                                                             requested: list[dict[str, Any]]) -> None:
    for rule in owned:  # a holder may always grant its own rules
        assert all(any(escalation.covers(o, atom) for o in owned) for atom in escalation.atoms(rule))
    for rule in requested:
        for atom in escalation.atoms(rule):
            if atom["verbs"][0] == "*" or "*" in atom.get("apiGroups", []) or any(
                    r.startswith("*") for r in atom.get("resources", [])):
                continue  # a wildcard asked for is no single request
            covered = any(escalation.covers(o, atom) for o in owned)
            assert covered == any(rule_allows(_request_of(atom), o) for o in owned), atom
