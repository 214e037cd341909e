"""Admission webhooks called by kube-sim, seen as a client and as the webhook see them: a real HTTPS webhook
server (its own CA, handed over as ``caBundle``) mutating, refusing, timing out; failure policies; selectors;
dry runs; reinvocation; equivalent versions; webhooks given as a Service."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controller_manager.api.resources import VALIDATINGWEBHOOKCONFIGURATIONS
from controller_manager.sim import tls
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from controller_manager.sim.apiserver.objects import Stored
from tests.sim.apiserver.conftest import Client, configmap, pod
from tests.sim.apiserver.kubectl_harness import serve

GROUP = "/apis/admissionregistration.k8s.io/v1"
PODS = "/api/v1/namespaces/default/pods"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SERVICE_DNS = "hook.webhooks.svc"

Review = dict[str, Any]
Handler = Callable[[Review], Awaitable[dict[str, Any]]]


def allow(review: Review, **response: Any) -> dict[str, Any]:
    return {"uid": review["request"]["uid"], "allowed": True, **response}


def json_patch(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(list(ops)).encode()).decode()}


def add_label(review: Review, key: str, value: str) -> dict[str, Any]:
    labels = review["request"]["object"]["metadata"].get("labels")
    if labels is None:
        return json_patch({"op": "add", "path": "/metadata/labels", "value": {key: value}})
    return json_patch({"op": "add", "path": f"/metadata/labels/{key.replace('/', '~1')}", "value": value})


@dataclass
class WebhookServer:
    """An HTTPS AdmissionReview server: each path answers with its handler and records what it was sent."""
    cert: tls.ServingCert
    port: int = 0
    handlers: dict[str, Handler] = field(default_factory=dict)
    received: dict[str, list[Review]] = field(default_factory=dict)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.cert.ca_pem).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def serve(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.received.setdefault(request.path, []).append(review)
        response = await self.handlers[request.path](review)
        api_version = review.get("apiVersion")
        return web.json_response({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})


@pytest.fixture
async def hooks() -> AsyncIterator[WebhookServer]:
    server = WebhookServer(tls.generate(dns_names=("localhost", SERVICE_DNS)))
    app = web.Application()
    app.router.add_post("/{tail:.*}", server.serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server.cert.server_context())
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        await runner.cleanup()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def hook(name: str, url: str, ca_bundle: str, **fields: Any) -> dict[str, Any]:
    rule = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    return {"name": name, "clientConfig": {"url": url, "caBundle": ca_bundle}, "rules": [rule],
            "sideEffects": "None", "admissionReviewVersions": ["v1"], **fields}


async def configure(client: Client, kind: str, name: str, *webhooks: dict[str, Any]) -> None:
    status, body = await client.post(f"{GROUP}/{kind}webhookconfigurations",
                                     {"metadata": {"name": name}, "webhooks": list(webhooks)})
    assert status == 201, body


async def test_mutating_webhook_patch_is_stored_and_validating_webhook_sees_the_result(
        client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "mutated-by", "webhook"))

    async def validate(review: Review) -> dict[str, Any]:
        return allow(review)

    hooks.handlers = {"/mutate": mutate, "/validate": validate}
    await configure(client, "mutating", "m", hook("label.example.com", hooks.url("/mutate"), hooks.ca_bundle))
    await configure(client, "validating", "v", hook("check.example.com", hooks.url("/validate"), hooks.ca_bundle))

    status, created = await client.post(PODS, {**pod("", labels={"app": "web"}),
                                               "metadata": {"generateName": "web-", "labels": {"app": "web"}}})
    assert status == 201, created
    assert created["metadata"]["labels"] == {"app": "web", "mutated-by": "webhook"}
    status, stored = await client.get(f"{PODS}/{created['metadata']['name']}")
    assert stored["metadata"]["labels"]["mutated-by"] == "webhook"

    [sent] = hooks.received["/mutate"]
    request = sent["request"]
    assert sent["apiVersion"] == "admission.k8s.io/v1"
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["requestKind"] == request["kind"]
    assert request["namespace"] == "default"
    assert request["dryRun"] is False
    assert request["oldObject"] is None
    assert request["options"]["kind"] == "CreateOptions"
    assert request["userInfo"]["username"] == "admin"
    # Mutating admission runs before the registry names the object and gives it a uid.
    assert "uid" not in request["object"]["metadata"]
    assert "name" not in request["object"]["metadata"]
    # Defaults and built-in mutating admission come first.
    assert request["object"]["spec"]["restartPolicy"] == "Always"

    [checked] = hooks.received["/validate"]
    seen = checked["request"]["object"]
    assert seen["metadata"]["labels"]["mutated-by"] == "webhook"
    assert seen["metadata"]["uid"] == created["metadata"]["uid"]
    assert seen["metadata"]["name"] == created["metadata"]["name"]
    assert checked["request"]["name"] == created["metadata"]["name"]
    assert checked["request"]["uid"] != request["uid"]


async def test_validating_webhook_denial_is_the_status_returned(client: Client, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        if labels.get("deny") == "yes":
            return {"uid": review["request"]["uid"], "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": "pods labelled deny=yes are refused"},
                    "warnings": ["looked at it"]}
        return allow(review)

    hooks.handlers = {"/validate": validate}
    await configure(client, "validating", "v", hook("deny.example.com", hooks.url("/validate"), hooks.ca_bundle))
    resp = await client.tc.post(PODS, json=pod("bad", labels={"deny": "yes"}),
                                headers={"Authorization": "Bearer admin-token"})
    body = await resp.json()
    assert resp.status == 403, body
    assert body["message"] == 'admission webhook "deny.example.com" denied the request: pods labelled deny=yes ' \
                              "are refused"
    assert body["reason"] == "Forbidden"
    assert body["kind"] == "Status"
    assert body["status"] == "Failure"
    assert resp.headers.getall("Warning") == ['299 - "looked at it"']
    status, _ = await client.get(f"{PODS}/bad")
    assert status == 404
    status, body = await client.post(PODS, pod("good"))
    assert status == 201, body

    # An update is sent with the object it replaces; a refusal leaves the stored one as it was.
    body["metadata"]["labels"] = {"deny": "yes"}
    status, refused = await client.put(f"{PODS}/good", body)
    assert status == 403, refused
    update = hooks.received["/validate"][-1]["request"]
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["metadata"]["name"] == "good"
    assert update["options"]["kind"] == "UpdateOptions"
    status, stored = await client.get(f"{PODS}/good")
    assert stored["metadata"].get("labels") in (None, {})


async def test_denial_without_code_or_message(client: Client, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        return {"uid": review["request"]["uid"], "allowed": False}

    hooks.handlers = {"/validate": validate}
    await configure(client, "validating", "v", hook("deny.example.com", hooks.url("/validate"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 400
    assert body["message"] == 'admission webhook "deny.example.com" denied the request without explanation'


async def test_failure_policy_with_an_unreachable_webhook(client: Client, hooks: WebhookServer) -> None:
    port = closed_port()
    url = f"https://127.0.0.1:{port}/validate"
    await configure(client, "validating", "v", hook("down.example.com", url, hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 500, body
    assert body["reason"] == "InternalError"
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post '
        f'"https://127.0.0.1:{port}/validate?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')

    status, config = await client.get(f"{GROUP}/validatingwebhookconfigurations/v")
    config["webhooks"][0]["failurePolicy"] = "Ignore"
    status, body = await client.put(f"{GROUP}/validatingwebhookconfigurations/v", config)
    assert status == 200, body
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body


async def test_webhook_timeout(client: Client, hooks: WebhookServer) -> None:
    release = asyncio.Event()

    async def slow(review: Review) -> dict[str, Any]:
        await release.wait()
        return allow(review)

    hooks.handlers = {"/slow": slow}
    await configure(client, "mutating", "m", hook("slow.example.com", hooks.url("/slow"), hooks.ca_bundle,
                                                  timeoutSeconds=1))
    try:
        status, body = await asyncio.wait_for(client.post(PODS, pod("p")), 10)
        assert status == 500, body
        assert body["message"] == (
            'Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post '
            f'"{hooks.url("/slow")}?timeout=1s": context deadline exceeded')
        status, config = await client.get(f"{GROUP}/mutatingwebhookconfigurations/m")
        config["webhooks"][0]["failurePolicy"] = "Ignore"
        await client.put(f"{GROUP}/mutatingwebhookconfigurations/m", config)
        status, body = await asyncio.wait_for(client.post(PODS, pod("p")), 10)
        assert status == 201, body
    finally:
        release.set()


async def test_untrusted_certificate_fails_the_call(client: Client, hooks: WebhookServer) -> None:
    other_ca = base64.b64encode(tls.generate().ca_pem).decode()
    await configure(client, "validating", "v", hook("tls.example.com", hooks.url("/v"), other_ca))
    status, body = await client.post(PODS, pod("p"))
    assert status == 500, body
    assert body["message"].endswith(
        "tls: failed to verify certificate: x509: certificate signed by unknown authority"), body


async def test_namespace_and_object_selectors(client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "seen", "yes"))

    hooks.handlers = {"/ns": mutate, "/obj": mutate}
    status, body = await client.post("/api/v1/namespaces", {"metadata": {"name": "prod", "labels": {"env": "prod"}}})
    assert status == 201, body
    await configure(client, "mutating", "a", hook("ns.example.com", hooks.url("/ns"), hooks.ca_bundle,
                                                  namespaceSelector={"matchLabels": {"env": "prod"}}))
    await configure(client, "mutating", "b", hook("obj.example.com", hooks.url("/obj"), hooks.ca_bundle,
                                                  objectSelector={"matchExpressions": [
                                                      {"key": "hooked", "operator": "Exists"}]}))
    status, in_prod = await client.post("/api/v1/namespaces/prod/pods", pod("p"))
    assert status == 201, in_prod
    assert in_prod["metadata"]["labels"] == {"seen": "yes"}
    status, in_default = await client.post(PODS, pod("p"))
    assert in_default["metadata"].get("labels") in (None, {})
    status, selected = await client.post(PODS, pod("q", labels={"hooked": "1"}))
    assert selected["metadata"]["labels"] == {"hooked": "1", "seen": "yes"}
    assert len(hooks.received["/ns"]) == 1
    assert len(hooks.received["/obj"]) == 1

    # The old object's labels count too: an update removing the label is still sent.
    selected["metadata"]["labels"] = {}
    status, body = await client.put(f"{PODS}/q", selected)
    assert status == 200, body
    assert len(hooks.received["/obj"]) == 2


async def test_dry_run(client: Client, api: ApiServer, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "seen", "yes"))

    hooks.handlers = {"/m": mutate}
    await configure(client, "mutating", "m", hook("dry.example.com", hooks.url("/m"), hooks.ca_bundle,
                                                  sideEffects="NoneOnDryRun"))
    status, body = await client.post(PODS, pod("p"), params={"dryRun": "All"})
    assert status == 201, body
    assert body["metadata"]["labels"] == {"seen": "yes"}
    assert hooks.received["/m"][-1]["request"]["dryRun"] is True
    assert hooks.received["/m"][-1]["request"]["options"]["dryRun"] == ["All"]
    status, _ = await client.get(f"{PODS}/p")
    assert status == 404

    # v1 refuses to store sideEffects other than None/NoneOnDryRun; a configuration stored before (by an older
    # API version) is put in the store as it is: a dry run it matches is refused, without calling it.
    legacy = hook("legacy.example.com", hooks.url("/legacy"), hooks.ca_bundle, sideEffects="Some",
                  failurePolicy="Fail", matchPolicy="Equivalent", namespaceSelector={}, objectSelector={},
                  timeoutSeconds=10)
    legacy["rules"][0]["scope"] = "*"
    store = api.store(VALIDATINGWEBHOOKCONFIGURATIONS)
    store.put(Stored("legacy", {"apiVersion": "admissionregistration.k8s.io/v1",
                                "kind": "ValidatingWebhookConfiguration",
                                "metadata": {"name": "legacy", "uid": "u", "resourceVersion": "1"},
                                "webhooks": [legacy]}, api.current_rv()))
    status, body = await client.post(PODS, pod("p"), params={"dryRun": "All"})
    assert status == 400, body
    assert body["message"] == 'admission webhook "legacy.example.com" does not support dry run'
    assert "/legacy" not in hooks.received
    status, body = await client.post(PODS, pod("p"))
    assert status == 500  # not a dry run: it is called (and nothing answers on /legacy)


async def test_reinvocation_if_needed(client: Client, hooks: WebhookServer) -> None:
    async def first(review: Review) -> dict[str, Any]:
        return allow(review)

    async def second(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "second", "yes"))

    hooks.handlers = {"/first": first, "/second": second}
    await configure(client, "mutating", "a", hook("first.example.com", hooks.url("/first"), hooks.ca_bundle,
                                                  reinvocationPolicy="IfNeeded"))
    await configure(client, "mutating", "b", hook("second.example.com", hooks.url("/second"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body
    calls = hooks.received["/first"]
    assert len(calls) == 2
    assert "labels" not in calls[0]["request"]["object"]["metadata"]
    assert calls[1]["request"]["object"]["metadata"]["labels"] == {"second": "yes"}
    assert len(hooks.received["/second"]) == 1


async def test_delete_is_sent_the_old_object(client: Client, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        return {"uid": review["request"]["uid"], "allowed": False, "status": {"code": 403, "message": "keep it"}}

    hooks.handlers = {"/v": validate}
    status, _ = await client.post(CONFIGMAPS, configmap("cm"))
    rule = {"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    await configure(client, "validating", "v", {**hook("keep.example.com", hooks.url("/v"), hooks.ca_bundle),
                                                "rules": [rule]})
    status, body = await client.delete(f"{CONFIGMAPS}/cm")
    assert status == 403, body
    assert body["message"] == 'admission webhook "keep.example.com" denied the request: keep it'
    request = hooks.received["/v"][0]["request"]
    assert request["operation"] == "DELETE"
    assert request["object"] is None
    assert request["oldObject"]["metadata"]["name"] == "cm"
    assert request["options"]["kind"] == "DeleteOptions"
    status, _ = await client.get(f"{CONFIGMAPS}/cm")
    assert status == 200


async def test_equivalent_versions(client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "seen", review["request"]["kind"]["version"]))

    hooks.handlers = {"/hpa": mutate}
    rule = {"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"],
            "resources": ["horizontalpodautoscalers"]}
    await configure(client, "mutating", "m", {**hook("hpa.example.com", hooks.url("/hpa"), hooks.ca_bundle),
                                              "rules": [rule]})
    hpa = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                    "maxReplicas": 3}}
    status, body = await client.post("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", hpa)
    assert status == 201, body
    assert body["metadata"]["labels"] == {"seen": "v2"}
    request = hooks.received["/hpa"][0]["request"]
    assert request["kind"] == {"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"}
    assert request["requestKind"]["version"] == "v1"
    assert request["object"]["apiVersion"] == "autoscaling/v2"

    status, config = await client.get(f"{GROUP}/mutatingwebhookconfigurations/m")
    config["webhooks"][0]["matchPolicy"] = "Exact"
    await client.put(f"{GROUP}/mutatingwebhookconfigurations/m", config)
    status, body = await client.post("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
                                     {**hpa, "metadata": {"name": "h2"}})
    assert status == 201, body
    assert body["metadata"].get("labels") in (None, {})
    assert len(hooks.received["/hpa"]) == 1


async def test_service_reference_and_v1beta1(client: Client, api: ApiServer, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        response = allow(review, **add_label(review, "via", "service"))
        response.pop("patchType")  # v1beta1: the patch is a JSONPatch without saying so
        return response

    hooks.handlers = {"/mutate": mutate}
    service = {"name": "hook", "namespace": "webhooks", "path": "/mutate", "port": 8443}
    await configure(client, "mutating", "m", {**hook("svc.example.com", "", hooks.ca_bundle),
                                              "clientConfig": {"service": service, "caBundle": hooks.ca_bundle},
                                              "admissionReviewVersions": ["v1beta1"]})
    status, body = await client.post(CONFIGMAPS, configmap("not-matched"))
    assert status == 201
    status, body = await client.post(PODS, pod("p"))
    assert status == 500, body
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "svc.example.com": failed to call webhook: Post '
        f'"https://{SERVICE_DNS}:8443/mutate?timeout=10s": no endpoints available for service "hook"')
    api.options.webhook_service_addresses[f"{SERVICE_DNS}:8443"] = f"127.0.0.1:{hooks.port}"
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"via": "service"}
    assert hooks.received["/mutate"][-1]["apiVersion"] == "admission.k8s.io/v1beta1"


async def test_invalid_response_uid(client: Client, hooks: WebhookServer) -> None:
    async def wrong(review: Review) -> dict[str, Any]:
        return {"uid": "not-it", "allowed": True}

    hooks.handlers = {"/v": wrong}
    await configure(client, "validating", "v", hook("uid.example.com", hooks.url("/v"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 500
    uid = hooks.received["/v"][0]["request"]["uid"]
    assert body["message"] == ('Internal error occurred: failed calling webhook "uid.example.com": received invalid '
                               f'webhook response: expected response.uid="{uid}", got "not-it"')


async def test_webhook_configurations_are_not_sent_to_webhooks(client: Client, hooks: WebhookServer) -> None:
    everything = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}
    port = closed_port()
    await configure(client, "validating", "v", {**hook("all.example.com", f"https://127.0.0.1:{port}/",
                                                       hooks.ca_bundle), "rules": [everything]})
    status, body = await client.post(f"{GROUP}/validatingwebhookconfigurations",
                                     {"metadata": {"name": "w"}, "webhooks": []})
    assert status == 201, body
    status, body = await client.delete(f"{GROUP}/validatingwebhookconfigurations/v")
    assert status == 200, body


async def test_patch_apply_and_status_writes(client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **add_label(review, "op", review["request"]["operation"].lower()))

    hooks.handlers = {"/m": mutate, "/status": mutate}
    await configure(client, "mutating", "m", hook("m.example.com", hooks.url("/m"), hooks.ca_bundle))
    rule = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"]}
    await configure(client, "mutating", "s", {**hook("s.example.com", hooks.url("/status"), hooks.ca_bundle),
                                              "rules": [rule]})
    status, body = await client.post(PODS, pod("p"))
    assert body["metadata"]["labels"] == {"op": "create"}
    status, body = await client.patch(f"{PODS}/p", {"metadata": {"annotations": {"a": "b"}}})
    assert status == 200, body
    assert body["metadata"]["labels"] == {"op": "update"}
    sent = hooks.received["/m"][-1]["request"]
    assert sent["operation"] == "UPDATE"
    assert sent["object"]["metadata"]["annotations"] == {"a": "b"}  # the patched object
    assert sent["oldObject"]["metadata"]["labels"] == {"op": "create"}
    assert sent["options"]["kind"] == "UpdateOptions"
    assert "/status" not in hooks.received  # a main-resource write is not a pods/status one

    status, body = await client.patch(f"{PODS}/p/status", {"status": {"phase": "Running"}})
    assert status == 200, body
    [status_write] = hooks.received["/status"]
    assert status_write["request"]["subResource"] == "status"
    assert status_write["request"]["requestSubResource"] == "status"
    assert len(hooks.received["/m"]) == 2

    apply = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "applied"},
             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    status, body = await client.call("PATCH", f"{PODS}/applied", apply, content_type="application/apply-patch+yaml",
                                     params={"fieldManager": "me"})
    assert status == 201, body
    assert body["metadata"]["labels"] == {"op": "create"}
    assert hooks.received["/m"][-1]["request"]["options"]["fieldManager"] == "me"


async def test_update_retried_when_the_object_changes_during_the_calls(client: Client, hooks: WebhookServer) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    async def mutate(review: Review) -> dict[str, Any]:
        if "from" in review["request"]["object"]["data"] and not release.is_set():
            entered.set()
            await release.wait()
        return allow(review, **add_label(review, "hooked", "yes"))

    hooks.handlers = {"/m": mutate}
    status, _ = await client.post(CONFIGMAPS, configmap("cm"))
    rule = {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    await configure(client, "mutating", "m", {**hook("m.example.com", hooks.url("/m"), hooks.ca_bundle),
                                              "rules": [rule]})
    patching = asyncio.ensure_future(client.patch(f"{CONFIGMAPS}/cm", {"data": {"from": "patch"}}))
    await asyncio.wait_for(entered.wait(), 10)
    # Another write lands while the webhook is being called (it is sent to the webhook too, answered at once).
    status, other = await client.patch(f"{CONFIGMAPS}/cm", {"data": {"other": "write"}})
    assert status == 200, other
    release.set()
    status, body = await asyncio.wait_for(patching, 10)
    assert status == 200, body
    # The patch was worked out again on top of the other write, and sent to the webhook again.
    assert body["data"] == {"k": "v", "other": "write", "from": "patch"}
    assert body["metadata"]["labels"] == {"hooked": "yes"}
    objects = [r["request"]["object"]["data"] for r in hooks.received["/m"]]
    assert objects[0] == {"k": "v", "from": "patch"}
    assert objects[-1] == {"k": "v", "other": "write", "from": "patch"}


async def test_namespace_selector_of_a_namespace_is_its_own_labels(client: Client, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        return {"uid": review["request"]["uid"], "allowed": False, "status": {"code": 403, "message": "no"}}

    hooks.handlers = {"/v": validate}
    rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}
    await configure(client, "validating", "v", {**hook("ns.example.com", hooks.url("/v"), hooks.ca_bundle),
                                                "rules": [rule],
                                                "namespaceSelector": {"matchLabels": {"guarded": "true"}}})
    status, body = await client.post("/api/v1/namespaces", {"metadata": {"name": "free"}})
    assert status == 201, body
    status, body = await client.post("/api/v1/namespaces", {"metadata": {"name": "g", "labels": {"guarded": "true"}}})
    assert status == 403, body
    assert body["message"] == 'admission webhook "ns.example.com" denied the request: no'
    assert "namespace" not in hooks.received["/v"][0]["request"]

    # An update or delete of a Namespace names it as the request's namespace, as its path does.
    async def allow_all(review: Review) -> dict[str, Any]:
        return allow(review)

    hooks.handlers["/all"] = allow_all
    rule = {"operations": ["UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["namespaces"]}
    await configure(client, "validating", "w", {**hook("all.example.com", hooks.url("/all"), hooks.ca_bundle),
                                                "rules": [rule]})
    status, ns = await client.get("/api/v1/namespaces/free")
    ns["metadata"]["labels"] = {"x": "y"}
    status, body = await client.put("/api/v1/namespaces/free", ns)
    assert status == 200, body
    status, body = await client.delete("/api/v1/namespaces/free")
    assert status == 200, body
    sent = [(r["request"]["operation"], r["request"]["namespace"], r["request"]["name"])
            for r in hooks.received["/all"]]
    assert sent == [("UPDATE", "free", "free"), ("DELETE", "free", "free")]


async def test_bad_patches(client: Client, hooks: WebhookServer) -> None:
    async def broken(review: Review) -> dict[str, Any]:
        return allow(review, **json_patch({"op": "replace", "path": "/metadata/nothing/here", "value": 1}))

    async def unknown_field(review: Review) -> dict[str, Any]:
        return allow(review, **json_patch({"op": "add", "path": "/spec/madeUp", "value": 1},
                                          {"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}))

    hooks.handlers = {"/broken": broken, "/unknown": unknown_field}
    await configure(client, "mutating", "a", hook("broken.example.com", hooks.url("/broken"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 500, body
    assert body["reason"] == "InternalError"
    await client.delete(f"{GROUP}/mutatingwebhookconfigurations/a")
    await configure(client, "mutating", "b", hook("unknown.example.com", hooks.url("/unknown"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body
    assert body["metadata"]["annotations"] == {"x": "y"}
    assert "madeUp" not in body["spec"]  # decoded into the kind: unknown fields dropped


async def test_eviction_is_sent_to_webhooks_as_an_eviction(client: Client, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        return {"uid": review["request"]["uid"], "allowed": False,
                "status": {"code": 429, "reason": "TooManyRequests", "message": "not now"}}

    hooks.handlers = {"/v": validate}
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body
    rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"]}
    await configure(client, "validating", "v", {**hook("evict.example.com", hooks.url("/v"), hooks.ca_bundle),
                                                "rules": [rule]})
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    status, body = await client.post(f"{PODS}/p/eviction", eviction)
    assert status == 429, body
    assert body["message"] == 'admission webhook "evict.example.com" denied the request: not now'
    request = hooks.received["/v"][0]["request"]
    assert request["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["subResource"] == "eviction"
    assert request["name"] == "p"
    assert request["object"]["kind"] == "Eviction"
    status, _ = await client.get(f"{PODS}/p")
    assert status == 200


async def test_scale_is_sent_to_webhooks_as_a_scale(client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        replicas = review["request"]["object"]["spec"]["replicas"]
        return allow(review, **json_patch({"op": "replace", "path": "/spec/replicas", "value": min(replicas, 3)}))

    hooks.handlers = {"/m": mutate}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                           "template": {"metadata": {"labels": {"app": "d"}},
                                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    status, body = await client.post(deployments, deployment)
    assert status == 201, body
    rule = {"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/scale"]}
    await configure(client, "mutating", "m", {**hook("cap.example.com", hooks.url("/m"), hooks.ca_bundle),
                                              "rules": [rule]})
    status, body = await client.patch(f"{deployments}/d/scale", {"spec": {"replicas": 10}})
    assert status == 200, body
    assert body["spec"]["replicas"] == 3
    request = hooks.received["/m"][0]["request"]
    assert request["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert request["subResource"] == "scale"
    assert request["oldObject"]["spec"]["replicas"] == 1
    assert request["object"]["spec"]["replicas"] == 10
    status, scale = await client.get(f"{deployments}/d/scale")
    scale["spec"]["replicas"] = 7
    status, body = await client.put(f"{deployments}/d/scale", scale)
    assert status == 200, body
    status, stored = await client.get(f"{deployments}/d")
    assert stored["spec"]["replicas"] == 3
    status, body = await client.put(f"{deployments}/d", {**stored, "spec": {**stored["spec"], "replicas": 9}})
    assert status == 200, body
    assert body["spec"]["replicas"] == 9  # the main resource is not deployments/scale
    assert len(hooks.received["/m"]) == 2


async def test_validating_webhooks_are_called_in_parallel(client: Client, hooks: WebhookServer) -> None:
    both = asyncio.Barrier(2)

    async def wait_for_the_other(review: Review) -> dict[str, Any]:
        await asyncio.wait_for(both.wait(), 5)  # only passes when both calls are in flight together
        return allow(review)

    hooks.handlers = {"/a": wait_for_the_other, "/b": wait_for_the_other}
    await configure(client, "validating", "v", hook("a.example.com", hooks.url("/a"), hooks.ca_bundle),
                    hook("b.example.com", hooks.url("/b"), hooks.ca_bundle))
    status, body = await client.post(PODS, pod("p"))
    assert status == 201, body


async def test_events_are_equivalent_across_groups(client: Client, hooks: WebhookServer) -> None:
    async def mutate(review: Review) -> dict[str, Any]:
        return allow(review, **json_patch({"op": "replace", "path": "/note", "value": "rewritten"}))

    hooks.handlers = {"/e": mutate}
    rule = {"operations": ["CREATE"], "apiGroups": ["events.k8s.io"], "apiVersions": ["v1"], "resources": ["events"]}
    await configure(client, "mutating", "m", {**hook("ev.example.com", hooks.url("/e"), hooks.ca_bundle),
                                              "rules": [rule]})
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"}, "message": "original",
             "reason": "Tested", "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z",
             "reportingComponent": "tests", "reportingInstance": "tests-1", "action": "Test",
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}}
    status, body = await client.post("/api/v1/namespaces/default/events", event)
    assert status == 201, body
    assert body["message"] == "rewritten"
    request = hooks.received["/e"][0]["request"]
    assert request["kind"] == {"group": "events.k8s.io", "version": "v1", "kind": "Event"}
    assert request["requestKind"] == {"group": "", "version": "v1", "kind": "Event"}
    assert request["object"]["note"] == "original"
    assert request["object"]["regarding"]["name"] == "p"


async def test_kubectl_shows_webhook_warnings_and_denials(tmp_path: Path, hooks: WebhookServer) -> None:
    async def validate(review: Review) -> dict[str, Any]:
        data = review["request"]["object"].get("data") or {}
        if data.get("allowed") != "yes":
            return {"uid": review["request"]["uid"], "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": "data.allowed must be yes"}}
        return allow(review, warnings=["this ConfigMap was checked"])

    hooks.handlers = {"/cm": validate}
    config = f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: configmaps}}
webhooks:
- name: cm.example.com
  clientConfig: {{url: "{hooks.url('/cm')}", caBundle: {hooks.ca_bundle}}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  sideEffects: None
  admissionReviewVersions: [v1]
"""
    async with serve(ApiServer(options=ApiServerOptions()), tmp_path) as kubectl:
        await kubectl("apply", "-f", "-", stdin=config)
        proc = await kubectl.start("create", "configmap", "ok", "--from-literal=allowed=yes")
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err
        assert out.decode().strip() == "configmap/ok created"
        assert err.decode().strip() == "Warning: this ConfigMap was checked"
        proc = await kubectl.start("create", "configmap", "refused", "--from-literal=allowed=no")
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1
        assert err.decode().strip() == ('error: failed to create configmap: admission webhook "cm.example.com" '
                                        "denied the request: data.allowed must be yes")
