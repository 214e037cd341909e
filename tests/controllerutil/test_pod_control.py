"""PodControl and GetPodFromTemplate (ported from controller_utils_test.go's pod control tests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.api.resources import PODS, REPLICASETS
from controller_manager.client.errors import Conflict, Forbidden, NotFound, ServerError, has_status_cause
from controller_manager.controllerutil.controller_ref import new_controller_ref
from controller_manager.controllerutil.pod_control import PodControl, pod_from_template, pods_prefix
from controller_manager.sim.apiserver.server import ApiServer
from tests.runtime.fakes import FakeClient, FakeRecorder, SimClient

RS: dict[str, Any] = {
    "metadata": {"name": "foobar", "namespace": "default", "uid": "rs-uid", "resourceVersion": "18"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"foo": "bar"}},
        "template": {
            "metadata": {
                "labels": {"name": "foo", "type": "production"},
                "annotations": {"note": "x"},
                "finalizers": ["example.com/keep"],
            },
            "spec": {
                "containers": [{"name": "c", "image": "foo/bar", "terminationMessagePath": "/dev/termination-log",
                                "imagePullPolicy": "IfNotPresent"}],
                "restartPolicy": "Always",
                "dnsPolicy": "Default",
                "nodeSelector": {"baz": "blah"},
            },
        },
    },
}
TEMPLATE = RS["spec"]["template"]
REF = new_controller_ref(RS, REPLICASETS)


def test_pod_from_template() -> None:
    frozen = copy.deepcopy(TEMPLATE)
    pod = pod_from_template(TEMPLATE, RS, REF)
    assert pod == {
        "metadata": {
            "generateName": "foobar-",
            "labels": {"name": "foo", "type": "production"},
            "annotations": {"note": "x"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "foobar", "uid": "rs-uid",
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": TEMPLATE["spec"],
    }
    # A copy: changing the new pod never reaches the (cached) template.
    pod["spec"]["containers"][0]["image"] = "changed"
    pod["metadata"]["labels"]["extra"] = "y"
    assert frozen == TEMPLATE


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        pytest.param("web", "web-", id="dash appended"),
        pytest.param("a" * 252, "a" * 252 + "-", id="253 with dash still valid"),
        pytest.param("a" * 253, "a" * 253, id="too long for a dash"),
    ],
)
def test_pods_prefix(name: str, prefix: str) -> None:
    assert pods_prefix(name) == prefix


async def test_create_pods_posts_template_pod_and_records_event() -> None:
    # TestCreatePodsWithGenerateName: "Create pod"
    client, recorder = FakeClient(), FakeRecorder()
    created = await PodControl(client, recorder).create_pods("default", TEMPLATE, RS, REF)
    (call,) = client.of("create")
    assert (call.resource, call.namespace) == ("pods", "default")
    assert call.body["metadata"]["generateName"] == "foobar-"
    assert call.body["metadata"]["labels"] == TEMPLATE["metadata"]["labels"]
    assert call.body["metadata"]["ownerReferences"] == [REF]
    assert call.body["spec"] == TEMPLATE["spec"]
    assert created["metadata"]["name"] == "foobar-x1"
    assert recorder.events == [("foobar", "Normal", "SuccessfulCreate", "Created pod: foobar-x1")]


async def test_create_pods_with_generate_name() -> None:
    # TestCreatePodsWithGenerateName: "Create pod with generate name"
    client, recorder = FakeClient(), FakeRecorder()
    await PodControl(client, recorder).create_pods("default", TEMPLATE, RS, REF, generate_name="hello-")
    assert client.of("create")[0].body["metadata"]["generateName"] == "hello-"


async def test_create_pods_defaults_ref_from_owner_kind() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    owner = {**RS, "apiVersion": "apps/v1", "kind": "ReplicaSet"}
    await PodControl(client, recorder).create_pods("default", TEMPLATE, owner)
    assert client.of("create")[0].body["metadata"]["ownerReferences"] == [REF]


async def test_owner_resource_completes_ref_and_events() -> None:
    # RS came from a List: no kind/apiVersion on the object itself.
    client, recorder = FakeClient(), FakeRecorder()
    await PodControl(client, recorder, REPLICASETS).create_pods("default", TEMPLATE, RS)
    assert client.of("create")[0].body["metadata"]["ownerReferences"] == [REF]
    assert recorder.resources == [REPLICASETS]


async def test_create_pods_refuses_template_without_labels() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    bare = {"metadata": {}, "spec": TEMPLATE["spec"]}
    with pytest.raises(ValueError, match=r"^unable to create pods, no labels$"):
        await PodControl(client, recorder).create_pods("default", bare, RS, REF)
    assert client.calls == []
    assert recorder.events == []


async def test_create_pods_refuses_incomplete_ref() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    with pytest.raises(ValueError, match=r"^controllerRef has empty Kind$"):
        await PodControl(client, recorder).create_pods("default", TEMPLATE, RS, {**REF, "kind": ""})
    assert client.calls == []


async def test_create_failure_records_warning() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    err = Forbidden(403, "Forbidden", 'pods "foobar-" is forbidden: exceeded quota: compute')
    client.errors[("create", "foobar-")] = err
    with pytest.raises(Forbidden):
        await PodControl(client, recorder).create_pods("default", TEMPLATE, RS, REF)
    assert recorder.events == [("foobar", "Warning", "FailedCreate",
                                'Error creating: pods "foobar-" is forbidden: exceeded quota: compute')]


async def test_create_in_terminating_namespace_records_nothing() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    err = Forbidden(403, "Forbidden", "unable to create new content in namespace default because it is being "
                    "terminated", {"causes": [{"reason": "NamespaceTerminating", "message": "namespace default is "
                                               "being terminated", "field": "metadata.namespace"}]})
    client.errors[("create", "foobar-")] = err
    assert has_status_cause(err, "NamespaceTerminating")
    with pytest.raises(Forbidden):
        await PodControl(client, recorder).create_pods("default", TEMPLATE, RS, REF)
    assert recorder.events == []


async def test_delete_pod() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    await PodControl(client, recorder).delete_pod("default", "foobar-abc", RS, uid="pod-uid")
    (call,) = client.of("delete")
    assert (call.resource, call.name, call.namespace, call.options["uid"]) == ("pods", "foobar-abc", "default",
                                                                               "pod-uid")
    assert recorder.events == [("foobar", "Normal", "SuccessfulDelete", "Deleted pod: foobar-abc")]


async def test_delete_missing_pod_raises_not_found_without_event() -> None:
    # TestDeletePodsAllowsMissing
    client, recorder = FakeClient(), FakeRecorder()
    client.errors[("delete", "podName")] = NotFound(404, "NotFound", 'pods "podName" not found')
    with pytest.raises(NotFound):
        await PodControl(client, recorder).delete_pod("namespace-name", "podName", RS)
    assert recorder.events == []


async def test_delete_failure_records_warning() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    client.errors[("delete", "p")] = ServerError(500, "InternalError", "etcdserver: request timed out")
    with pytest.raises(ServerError):
        await PodControl(client, recorder).delete_pod("default", "p", RS)
    assert recorder.events == [("foobar", "Warning", "FailedDelete", "Error deleting: etcdserver: request timed out")]


async def test_patch_pod_is_strategic() -> None:
    client, recorder = FakeClient(), FakeRecorder()
    await PodControl(client, recorder).patch_pod("default", "p", {"metadata": {"labels": {"a": "b"}}})
    (call,) = client.of("patch")
    assert call.options["patch_type"] == "strategic"
    assert call.body == {"metadata": {"labels": {"a": "b"}}}


# --- against kube-sim's API server -----------------------------------------------------------------


async def test_sim_create_and_delete_with_uid_precondition() -> None:
    sim, recorder = SimClient(ApiServer()), FakeRecorder()
    rs = await sim.create(REPLICASETS, {"metadata": {"name": "foobar", "namespace": "default"},
                                        "spec": {**RS["spec"], "selector": {"matchLabels": TEMPLATE["metadata"]
                                                                            ["labels"]}}}, "default")
    control = PodControl(sim, recorder, REPLICASETS)
    first = await control.create_pods("default", TEMPLATE, rs)
    second = await control.create_pods("default", TEMPLATE, rs)
    assert first["metadata"]["name"].startswith("foobar-")
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["ownerReferences"] == [new_controller_ref(rs, REPLICASETS)]
    assert first["metadata"]["labels"] == TEMPLATE["metadata"]["labels"]

    with pytest.raises(Conflict):
        await control.delete_pod("default", first["metadata"]["name"], rs, uid="not-its-uid")
    await control.delete_pod("default", first["metadata"]["name"], rs, uid=first["metadata"]["uid"])
    # Pods end gracefully: still there, now with a deletionTimestamp.
    assert (await sim.get(PODS, first["metadata"]["name"], "default"))["metadata"].get("deletionTimestamp")
    with pytest.raises(NotFound):
        await control.delete_pod("default", "never-was", rs)
    reasons = [e[2] for e in recorder.events]
    assert reasons == ["SuccessfulCreate", "SuccessfulCreate", "FailedDelete", "SuccessfulDelete"]
