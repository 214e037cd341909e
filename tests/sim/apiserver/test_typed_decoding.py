"""Bodies decoded into their kinds as the real server decodes them, and objects written back by Go's JSON rules."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.apiserver.conftest import Client, configmap, deployment

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"


def with_spec(**spec: Any) -> dict[str, Any]:
    body = deployment("web")
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize(("body", "message"), [
    pytest.param(with_spec(replicas="three"), 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                 "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
                 id="string-for-int32"),
    pytest.param(with_spec(replicas=1.5), 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                 "cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
                 id="fraction-for-int32"),
    pytest.param(with_spec(replicas=2**31), 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                 "cannot unmarshal number 2147483648 into Go struct field DeploymentSpec.spec.replicas of type "
                 "int32", id="int32-overflow"),
    pytest.param(with_spec(paused="yes"), 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                 "cannot unmarshal string into Go struct field DeploymentSpec.spec.paused of type bool",
                 id="string-for-bool"),
    pytest.param(with_spec(template=[]), 'Deployment in version "v1" cannot be handled as a Deployment: json: '
                 "cannot unmarshal array into Go struct field DeploymentSpec.spec.template of type "
                 "v1.PodTemplateSpec", id="array-for-struct"),
    pytest.param(with_spec(template={"spec": {"containers": ["nginx"]}}),
                 'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into '
                 "Go struct field PodSpec.spec.template.spec.containers of type v1.Container",
                 id="string-in-list-of-structs"),
    pytest.param(with_spec(template={"spec": {"containers": [{"name": "c", "ports": [{"protocol": 6}]}]}}),
                 'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal number into '
                 "Go struct field ContainerPort.spec.template.spec.containers.ports.protocol of type v1.Protocol",
                 id="named-string-type"),
])
async def test_a_value_of_the_wrong_type_is_400_with_gos_message(client: Client, body: Any, message: str) -> None:
    code, status = await client.post(DEPLOYMENTS, body)
    assert code == 400, status
    assert status["reason"] == "BadRequest"
    assert status["message"] == message
    code, _ = await client.get(f"{DEPLOYMENTS}/web")
    assert code == 404


async def test_configmap_data_must_be_strings(client: Client) -> None:
    body = configmap("cm")
    body["data"] = {"a": 1}
    code, status = await client.post(CONFIGMAPS, body)
    assert code == 400
    assert status["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
                                 "number into Go struct field ConfigMap.data of type string")


# In the order the body has them, as Go's decoder meets them.
WARNINGS = ['299 - "unknown field \\"spec.template.spec.containers[0].imagee\\""',
            '299 - "unknown field \\"spec.replica\\""']


def unknown_fields() -> dict[str, Any]:
    body = with_spec(replica=3)
    body["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    return body


@pytest.mark.parametrize(("params", "code", "warnings"), [
    pytest.param({"fieldValidation": "Strict"}, 400, None, id="strict"),
    pytest.param({}, 201, WARNINGS, id="warn-default"),
    pytest.param({"fieldValidation": "Warn"}, 201, WARNINGS, id="warn"),
    pytest.param({"fieldValidation": "Ignore"}, 201, [], id="ignore"),
])
async def test_unknown_fields_follow_field_validation(client: Client, params: dict[str, str], code: int,
                                                      warnings: list[str] | None) -> None:
    resp = await client.tc.post(DEPLOYMENTS, json=unknown_fields(), params=params,
                                headers={"Authorization": "Bearer admin-token"})
    body = await resp.json()
    assert resp.status == code, body
    if warnings is None:
        assert body["message"] == ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding '
                                   'error: unknown field "spec.template.spec.containers[0].imagee", unknown field '
                                   '"spec.replica"')
        return
    assert resp.headers.getall("Warning", []) == warnings
    assert "replica" not in body["spec"]
    assert "imagee" not in body["spec"]["template"]["spec"]["containers"][0]


async def test_duplicate_fields_are_strict_errors(client: Client) -> None:
    raw = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup"},'
           b'"data":{"a":"1","a":"2"}}')
    code, status = await client.call("POST", CONFIGMAPS, raw=raw, params={"fieldValidation": "Strict"})
    assert code == 400
    assert status["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
                                 'duplicate field "metadata.name", duplicate field "data.a"')
    code, created = await client.call("POST", CONFIGMAPS, raw=raw)
    assert code == 201
    assert created["data"] == {"a": "2"}  # the last value, as Go keeps it


async def test_an_unsupported_field_validation_is_422(client: Client) -> None:
    code, status = await client.call("POST", CONFIGMAPS, configmap("cm"), params={"fieldValidation": "Loose"})
    assert code == 422
    assert status["reason"] == "Invalid"
    assert status["message"] == ('CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
                                 '"Loose": supported values: "", "Ignore", "Strict", "Warn"')


async def test_a_patch_is_decoded_strictly_after_it_is_applied(client: Client) -> None:
    assert (await client.post(DEPLOYMENTS, deployment("web")))[0] == 201
    code, status = await client.call("PATCH", f"{DEPLOYMENTS}/web", {"spec": {"replicas": "2"}},
                                     content_type="application/merge-patch+json")
    assert code == 400
    assert "cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32" in \
        status["message"]
    code, status = await client.call("PATCH", f"{DEPLOYMENTS}/web", {"spec": {"replica": 2}},
                                     content_type="application/merge-patch+json",
                                     params={"fieldValidation": "Strict"})
    assert code == 400
    assert status["message"].endswith('strict decoding error: unknown field "spec.replica"')


async def test_a_fresh_replica_set_shows_the_fields_go_always_writes(client: Client) -> None:
    body = deployment("rs")
    body["kind"] = "ReplicaSet"
    body["spec"]["replicas"] = 0
    code, created = await client.post(REPLICASETS, body)
    assert code == 201, created
    assert created["status"] == {"replicas": 0}
    assert created["spec"]["template"]["metadata"]["creationTimestamp"] is None
    container = created["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {}
    _, listed = await client.get(REPLICASETS)
    assert listed["items"][0] == (await client.get(f"{REPLICASETS}/rs"))[1]


async def test_values_are_written_back_in_their_canonical_form(client: Client) -> None:
    body = deployment("web")
    body["spec"]["progressDeadlineSeconds"] = 600
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "0.5", "memory": 1024}}
    body["metadata"]["annotations"] = {}
    body["spec"]["template"]["spec"]["activeDeadlineSeconds"] = None
    code, created = await client.post(DEPLOYMENTS, body)
    assert code == 201, created
    assert "annotations" not in created["metadata"]  # omitempty drops an empty map
    assert "activeDeadlineSeconds" not in created["spec"]["template"]["spec"]
    assert created["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "500m", "memory": "1024"}}
    assert list(created) == ["kind", "apiVersion", "metadata", "spec", "status"]


async def test_yaml_bodies_in_and_yaml_answers_out(client: Client) -> None:
    manifest = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  enabled: 'yes'\n"
                b"  count: '3'\n")
    resp = await client.tc.post(CONFIGMAPS, data=manifest, headers={
        "Authorization": "Bearer admin-token", "Content-Type": "application/yaml", "Accept": "application/yaml"})
    assert resp.status == 201
    assert resp.content_type == "application/yaml"
    text = (await resp.read()).decode()
    assert 'data:\n  count: "3"\n  enabled: "yes"\n' in text  # go-yaml v2 double-quotes what YAML reads otherwise
    resp = await client.tc.get(f"{CONFIGMAPS}/missing", headers={"Authorization": "Bearer admin-token",
                                                                 "Accept": "application/yaml, application/json"})
    assert resp.status == 404
    assert (await resp.read()).decode().startswith("apiVersion: v1\ncode: 404\n")


async def test_a_yaml_bomb_is_400_and_the_server_keeps_serving(client: Client) -> None:
    from tests.sim.apiserver.test_yamlbody import BOMB

    code, status = await client.call("POST", CONFIGMAPS, raw=BOMB, content_type="application/yaml")
    assert code == 400
    assert status["message"] == ("the object provided is unrecognized (must be of type ConfigMap): yaml: document "
                                 f"contains excessive aliasing ({BOMB[:30].hex()} ...)")
    assert (await client.post(CONFIGMAPS, configmap("after")))[0] == 201
