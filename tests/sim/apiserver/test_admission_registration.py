"""admissionregistration.k8s.io/v1 kinds through the API: stored with upstream's defaults, refused with its
validation messages (no CEL is evaluated; test_webhooks.py has the webhooks called)."""

from __future__ import annotations

import json
from typing import Any

from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401

GROUP = "/apis/admissionregistration.k8s.io/v1"
RULE = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def webhook(name: str = "check.example.com", **fields: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": {"service": {"name": "hook", "namespace": "default"}},
            "rules": [RULE], "sideEffects": "None", "admissionReviewVersions": ["v1"], **fields}


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "matchConstraints": {"resourceRules": [RULE]},
        "validations": [{"expression": "object.spec.replicas <= 5"}], **spec}}


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def test_webhook_configurations_stored_with_defaults(client: Client) -> None:
    status, got = await client.post(f"{GROUP}/validatingwebhookconfigurations",
                                    {"metadata": {"name": "v"}, "webhooks": [webhook()]})
    assert status == 201, got
    hook = got["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"
    assert hook["matchPolicy"] == "Equivalent"
    assert hook["namespaceSelector"] == {}
    assert hook["objectSelector"] == {}
    assert hook["timeoutSeconds"] == 10
    assert hook["rules"][0]["scope"] == "*"
    assert hook["clientConfig"]["service"]["port"] == 443
    assert "reinvocationPolicy" not in hook
    assert got["metadata"]["generation"] == 1
    status, got = await client.post(f"{GROUP}/mutatingwebhookconfigurations",
                                    {"metadata": {"name": "m"}, "webhooks": [webhook()]})
    assert status == 201, got
    assert got["webhooks"][0]["reinvocationPolicy"] == "Never"
    got["webhooks"][0]["timeoutSeconds"] = 5
    status, got = await client.put(f"{GROUP}/mutatingwebhookconfigurations/m", got)
    assert status == 200, got
    assert got["metadata"]["generation"] == 2


async def test_webhook_validation(client: Client) -> None:
    bad = webhook("short.name", sideEffects=None, admissionReviewVersions=[], timeoutSeconds=31,
                  clientConfig={}, failurePolicy="Sometimes")
    bad.pop("sideEffects")
    status, body = await client.post(f"{GROUP}/validatingwebhookconfigurations",
                                     {"metadata": {"name": "bad"}, "webhooks": [bad, webhook("short.name")]})
    assert status == 422
    assert causes(body) == [
        ("webhooks[0].name", 'Invalid value: "short.name": should be a domain with at least three segments '
                             "separated by dots"),
        ("webhooks[0].failurePolicy", 'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'),
        ("webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"),
        ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
        ("webhooks[0].clientConfig", "Required value: exactly one of url or service is required"),
        ("webhooks[0].admissionReviewVersions", "Required value: must specify one of v1, v1beta1"),
        ("webhooks[1].name", 'Invalid value: "short.name": should be a domain with at least three segments '
                             "separated by dots"),
        ("webhooks[1].name", 'Duplicate value: "short.name"'),
    ]
    status, body = await client.post(f"{GROUP}/mutatingwebhookconfigurations", {
        "metadata": {"name": "bad"},
        "webhooks": [webhook(rules=[{"operations": ["PATCH"]}], sideEffects="Some", reinvocationPolicy="Always")]})
    assert status == 422
    assert causes(body) == [
        ("webhooks[0].rules[0].operations[0]",
         'Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE"'),
        ("webhooks[0].rules[0].apiGroups", "Required value"),
        ("webhooks[0].rules[0].apiVersions", "Required value"),
        ("webhooks[0].rules[0].resources", "Required value"),
        ("webhooks[0].sideEffects", 'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'),
        ("webhooks[0].reinvocationPolicy", 'Unsupported value: "Always": supported values: "IfNeeded", "Never"'),
    ]


async def test_validating_admission_policy_defaults_status_and_generation(client: Client) -> None:
    path = f"{GROUP}/validatingadmissionpolicies"
    status, got = await client.post(path, {**policy("p"), "status": {"observedGeneration": 7}})
    assert status == 201, got
    assert got["spec"]["failurePolicy"] == "Fail"
    assert got["spec"]["matchConstraints"] == {"resourceRules": [{**RULE, "scope": "*"}], "matchPolicy": "Equivalent",
                                               "namespaceSelector": {}, "objectSelector": {}}
    assert got["metadata"]["generation"] == 1
    assert got.get("status", {}) == {}
    got["status"] = {"observedGeneration": 1, "typeChecking": {}}
    status, got = await client.put(f"{path}/p/status", got)
    assert status == 200, got
    assert got["status"]["observedGeneration"] == 1
    got["spec"]["failurePolicy"] = "Ignore"
    got["status"] = {}
    status, got = await client.put(f"{path}/p", got)
    assert status == 200, got
    assert got["metadata"]["generation"] == 2
    assert got["status"]["observedGeneration"] == 1  # the main resource keeps the status


async def test_validating_admission_policy_validation(client: Client) -> None:
    path = f"{GROUP}/validatingadmissionpolicies"
    status, body = await client.post(path, {"metadata": {"name": "empty"}, "spec": {}})
    assert status == 422
    detail = "validations or auditAnnotations must contain at least one item"
    assert causes(body) == [("spec.matchConstraints", "Required value"),
                            ("spec.validations", f"Required value: {detail}"),
                            ("spec.auditAnnotations", f"Required value: {detail}")]
    status, body = await client.post(path, policy("norules", matchConstraints={}, failurePolicy="Maybe"))
    assert status == 422
    assert causes(body) == [
        ("spec.failurePolicy", 'Unsupported value: "Maybe": supported values: "Fail", "Ignore"'),
        ("spec.matchConstraints.resourceRules", "Required value")]


async def test_validating_admission_policy_binding(client: Client) -> None:
    path = f"{GROUP}/validatingadmissionpolicybindings"
    status, body = await client.post(path, {"metadata": {"name": "b"}, "spec": {}})
    assert status == 422
    assert causes(body) == [("spec.policyName", "Required value"),
                            ("spec.validationActions", "Required value: at least one validation action is required")]
    status, body = await client.post(path, {"metadata": {"name": "b"}, "spec": {
        "policyName": "p", "validationActions": ["Deny", "Warn"]}})
    assert status == 422
    assert body["details"]["causes"][0]["message"].endswith("must not contain both Deny and Warn (repeating the "
                                                            "same validation failure information in the API "
                                                            "response and headers serves no purpose)")
    status, got = await client.post(path, {"metadata": {"name": "b"}, "spec": {
        "policyName": "p", "validationActions": ["Deny"], "matchResources": {}}})
    assert status == 201, got
    assert got["spec"]["matchResources"] == {"matchPolicy": "Equivalent", "namespaceSelector": {},
                                             "objectSelector": {}}
    assert got["metadata"]["generation"] == 1


async def test_kubectl_admission_registration_kinds(kubectl: Kubectl) -> None:  # noqa: F811
    manifest = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                **policy("replicas")}
    out = await kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    assert out.strip() == "validatingadmissionpolicy.admissionregistration.k8s.io/replicas created"
    got = json.loads(await kubectl("get", "validatingadmissionpolicies", "replicas", "-o", "json"))
    assert got["spec"]["failurePolicy"] == "Fail"
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations",
                 "validatingadmissionpolicybindings"):
        await kubectl("get", kind)
