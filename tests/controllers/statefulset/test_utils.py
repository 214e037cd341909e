"""Pure StatefulSet helpers, ported from ``stateful_set_utils_test.go`` (identity, storage, ordinals, claims,
retention ownerReferences, maxUnavailable, revisions) and ``stateful_set_status_updater``'s status rules."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from controller_manager.controllers.statefulset import history, retention, status, util
from tests.controllers.statefulset.fakes import new_stateful_set


def pod_named(name: str, *, namespace: str = "default", uid: str = "", labels: dict[str, str] | None = None,
              phase: str = "", refs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "labels": labels or {}}
    if refs is not None:
        metadata["ownerReferences"] = refs
    return {"metadata": metadata, "spec": {}, "status": {"phase": phase} if phase else {}}


@pytest.mark.parametrize(("name", "parent", "ordinal"), [
    pytest.param("web-0", "web", 0, id="simple"),
    pytest.param("my-web-12", "my-web", 12, id="dashes-in-parent"),
    pytest.param("web", "", -1, id="no-ordinal"),
    pytest.param("web-", "", -1, id="empty-ordinal"),
    pytest.param("web-x1", "", -1, id="not-a-number"),
    pytest.param("web-2147483647", "web", 2147483647, id="max-int32"),
    pytest.param("web-2147483648", "web", -1, id="overflows-int32"),
])
def test_get_parent_name_and_ordinal(name: str, parent: str, ordinal: int) -> None:
    assert util.get_parent_name_and_ordinal(pod_named(name)) == (parent, ordinal)


def test_new_pod_identity_storage_and_controller_ref() -> None:
    sts = new_stateful_set(3, claims=("data", "logs"))
    pod = util.new_stateful_set_pod(sts, 1)
    m = pod["metadata"]
    assert m["name"] == "web-1"
    assert "generateName" not in m
    assert m["labels"] == {"app": "web", "statefulset.kubernetes.io/pod-name": "web-1",
                           "apps.kubernetes.io/pod-index": "1"}
    assert pod["spec"]["hostname"] == "web-1"
    assert pod["spec"]["subdomain"] == "web"
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                                      {"name": "logs", "persistentVolumeClaim": {"claimName": "logs-web-1"}}]
    assert m["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                     "uid": "web-uid", "controller": True, "blockOwnerDeletion": True}]
    assert util.identity_matches(sts, pod)
    assert util.storage_matches(sts, pod)
    assert "volumes" not in sts["spec"]["template"]["spec"]  # the template was not touched


@pytest.mark.parametrize(("change", "matches"), [
    pytest.param(lambda p: None, True, id="matches"),
    pytest.param(lambda p: p["metadata"].update(name="foo"), False, id="wrong-name"),
    pytest.param(lambda p: p["metadata"].update(name="web-x"), False, id="no-ordinal"),
    pytest.param(lambda p: p["metadata"].update(namespace="other"), False, id="wrong-namespace"),
    pytest.param(lambda p: p["metadata"]["labels"].pop("statefulset.kubernetes.io/pod-name"), False,
                 id="missing-pod-name-label"),
    pytest.param(lambda p: p["metadata"]["labels"].update({"statefulset.kubernetes.io/pod-name": "web-2"}), False,
                 id="wrong-pod-name-label"),
])
def test_identity_matches(change: Any, matches: bool) -> None:
    sts = new_stateful_set(3)
    pod = util.new_stateful_set_pod(sts, 1)
    change(pod)
    assert util.identity_matches(sts, pod) is matches


def test_update_identity_fixes_labels() -> None:
    sts = new_stateful_set(3)
    pod = util.new_stateful_set_pod(sts, 1)
    pod["metadata"]["labels"].pop("statefulset.kubernetes.io/pod-name")
    pod["metadata"]["namespace"] = "other"
    util.update_identity(sts, pod)
    assert util.identity_matches(sts, pod)


@pytest.mark.parametrize(("volumes", "matches"), [
    pytest.param([{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}], True, id="matches"),
    pytest.param([], False, id="missing"),
    pytest.param([{"name": "data", "emptyDir": {}}], False, id="not-a-claim"),
    pytest.param([{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-2"}}], False, id="wrong-claim"),
])
def test_storage_matches_and_update_storage(volumes: list[dict[str, Any]], matches: bool) -> None:
    sts = new_stateful_set(3)
    pod = pod_named("web-1")
    pod["spec"]["volumes"] = [*volumes, {"name": "scratch", "emptyDir": {}}]
    assert util.storage_matches(sts, pod) is matches
    util.update_storage(sts, pod)
    assert util.storage_matches(sts, pod)
    assert pod["spec"]["volumes"][-1] == {"name": "scratch", "emptyDir": {}}  # other volumes kept


def test_get_persistent_volume_claims_merges_selector_labels() -> None:
    sts = new_stateful_set(3)
    sts["spec"]["volumeClaimTemplates"][0]["metadata"]["labels"] = {"tier": "db"}
    claims = util.get_persistent_volume_claims(sts, pod_named("web-2"))
    assert list(claims) == ["data"]
    assert claims["data"]["metadata"] == {"name": "data-web-2", "namespace": "default",
                                          "labels": {"tier": "db", "app": "web"}}
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"] == {"name": "data", "labels": {"tier": "db"}}


@pytest.mark.parametrize(("pod", "ready"), [
    pytest.param(pod_named("web-0"), False, id="no-phase"),
    pytest.param(pod_named("web-0", phase="Pending"), False, id="pending"),
    pytest.param(pod_named("web-0", phase="Running"), False, id="running-not-ready"),
    pytest.param({**pod_named("web-0"), "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}}, True, id="running-and-ready"),
    pytest.param({**pod_named("web-0"), "status": {"phase": "Pending", "conditions": [
        {"type": "Ready", "status": "True"}]}}, False, id="ready-but-pending"),
])
def test_is_running_and_ready(pod: dict[str, Any], ready: bool) -> None:
    assert util.is_running_and_ready(pod) is ready


@pytest.mark.parametrize(("value", "replicas", "expected"), [
    pytest.param(None, 10, 1, id="default-1"),
    pytest.param(3, 10, 3, id="int"),
    pytest.param("25%", 10, 2, id="percent-rounds-down"),
    pytest.param("1%", 10, 1, id="at-least-1"),
    pytest.param("100%", 5, 5, id="all"),
])
def test_get_max_unavailable(value: Any, replicas: int, expected: int) -> None:
    rolling: dict[str, Any] = {"partition": 0}
    if value is not None:
        rolling["maxUnavailable"] = value
    sts = new_stateful_set(replicas, strategy={"type": "RollingUpdate", "rollingUpdate": rolling})
    assert util.get_max_unavailable(sts, replicas) == expected


@pytest.mark.parametrize(("strategy", "ordinal", "current"), [
    pytest.param({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}, 1, True, id="below-partition"),
    pytest.param({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}, 2, False, id="at-partition"),
    pytest.param({"type": "RollingUpdate"}, 1, True, id="no-rolling-below-current-replicas"),
    pytest.param({"type": "RollingUpdate"}, 2, False, id="no-rolling-above-current-replicas"),
    pytest.param({"type": "OnDelete"}, 0, False, id="on-delete-update"),
])
def test_new_versioned_pod_picks_revision(strategy: dict[str, Any], ordinal: int, current: bool) -> None:
    current_set = new_stateful_set(3, strategy=strategy)
    current_set["status"] = {"currentReplicas": 2}
    update_set = new_stateful_set(3, strategy=strategy, image="nginx:2")
    pod = util.new_versioned_stateful_set_pod(current_set, update_set, "web-a", "web-b", ordinal)
    assert pod["metadata"]["labels"][util.REVISION_LABEL] == ("web-a" if current else "web-b")
    assert pod["spec"]["containers"][0]["image"] == ("nginx:1" if current else "nginx:2")


def test_revision_round_trip_and_equality() -> None:
    sts = new_stateful_set(3)
    sts["metadata"]["annotations"] = {"a": "b"}
    rev = history.new_revision(sts, 4, 0)
    assert rev["revision"] == 4
    assert rev["metadata"]["name"].startswith("web-")
    assert rev["metadata"]["labels"] == {"app": "web", "controller-revision-hash": rev["metadata"]["name"][4:]}
    assert rev["metadata"]["annotations"] == {"a": "b"}
    assert rev["data"]["spec"]["template"]["$patch"] == "replace"
    changed = new_stateful_set(3, image="nginx:9")
    restored = history.apply_revision(changed, rev)
    assert restored["spec"]["template"] == sts["spec"]["template"]
    assert history.equal_revision(rev, history.new_revision(sts, 9, 0))
    assert not history.equal_revision(rev, history.new_revision(changed, 4, 0))
    assert history.new_revision(sts, 4, 1)["metadata"]["name"] != rev["metadata"]["name"]  # collision count
    assert history.revision_name("x" * 300, "h") == "x" * 223 + "-h"


# --- retention (TestIsClaimOwnerUpToDate, TestClaimOwnerUpToDateEdgeCases, TestUpdateClaimOwnerRefForSetAndPod) --


def _set(policy: tuple[str, str], replicas: int, name: str = "stateful-set", uid: str = "ss-456") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid},
            "spec": {"replicas": replicas,
                     "persistentVolumeClaimRetentionPolicy": {"whenScaled": policy[0], "whenDeleted": policy[1]}}}


def _controller(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}


R, D = retention.RETAIN, retention.DELETE


@pytest.mark.parametrize(("scaled", "deleted", "needs_pod", "needs_set", "replicas", "ordinal"), [
    pytest.param(R, R, False, False, 0, 0, id="retain"),
    pytest.param(R, D, False, True, 0, 0, id="on SS delete"),
    pytest.param(D, R, True, False, 2, 2, id="on scaledown only, condemned"),
    pytest.param(D, R, False, False, 2, 1, id="on scaledown only, remains"),
    pytest.param(D, D, True, False, 2, 2, id="on both, condemned"),
    pytest.param(D, D, False, True, 2, 1, id="on both, remains"),
])
def test_is_claim_owner_up_to_date(scaled: str, deleted: str, needs_pod: bool, needs_set: bool, replicas: int,
                                   ordinal: int) -> None:
    pod = pod_named(f"pod-{ordinal}", uid="pod-123")
    sts = _set((scaled, deleted), replicas)
    for others, pod_ref, set_ref in itertools.product((False, True), repeat=3):
        refs: list[dict[str, Any]] = []
        if pod_ref:
            refs.append(_controller(pod, "v1", "Pod"))
        if set_ref:
            refs.append(_controller(sts, "apps/v1", "StatefulSet"))
        if others:
            refs += [{"apiVersion": "v1", "kind": "Pod", "name": n, "uid": f"{n}-uid"} for n in ("rand1", "rand2")]
        claim = {"metadata": {"name": "target-claim", "ownerReferences": refs}}
        expected = pod_ref == needs_pod and set_ref == needs_set
        assert retention.is_claim_owner_up_to_date(claim, sts, pod) is expected, (pod_ref, set_ref, others)


def _ref(name: str, api_version: str, kind: str, uid: str, controller: bool | None) -> dict[str, Any]:
    ref: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(("refs", "policy", "matches"), [
    pytest.param([_ref("pod-1", "v1", "Pod", "pod-123", True)], (D, D), True, id="normal controller, pod"),
    pytest.param([_ref("pod-1", "v1", "Pod", "pod-123", None)], (D, D), False,
                 id="non-controller causes policy mismatch, pod"),
    pytest.param([_ref("pod-1", "v1", "Pod", "pod-stale", True)], (D, D), True,
                 id="stale controller does not affect policy, pod"),
    pytest.param([_ref("pod-1", "v1", "Pod", "pod-123", True), _ref("Random", "v1", "Pod", "random", True)], (D, D),
                 False, id="unexpected controller causes policy mismatch, pod"),
    pytest.param([_ref("stateful-set", "apps/v1", "StatefulSet", "ss-456", True)], (R, D), True,
                 id="normal controller, set"),
    pytest.param([_ref("stateful-set", "appsv1", "StatefulSet", "ss-456", None)], (R, D), False,
                 id="non-controller causes policy mismatch, set"),
    pytest.param([_ref("stateful-set", "apps/v1", "StatefulSet", "set-stale", True)], (R, D), True,
                 id="stale controller ignored, set"),
    pytest.param([_ref("stateful-set", "apps/v1", "StatefulSet", "ss-456", True),
                  _ref("Random", "apps/v1", "StatefulSet", "random", True)], (R, D), False,
                 id="unexpected controller causes policy mismatch, set"),
])
def test_claim_owner_up_to_date_edge_cases(refs: list[dict[str, Any]], policy: tuple[str, str],
                                           matches: bool) -> None:
    claim = {"metadata": {"name": "target-claim", "ownerReferences": refs}}
    assert retention.is_claim_owner_up_to_date(claim, _set(policy, 1), pod_named("pod-1", uid="pod-123")) is matches


@pytest.mark.parametrize(("scaled", "deleted", "condemned", "needs_pod", "needs_set", "unexpected"), [
    pytest.param(R, R, False, False, False, False, id="retain"),
    pytest.param(R, D, False, False, True, False, id="delete with set"),
    pytest.param(D, R, False, False, False, False, id="delete with scaledown, not condemned"),
    pytest.param(D, R, True, True, False, False, id="delete on scaledown, condemned"),
    pytest.param(D, D, False, False, True, False, id="delete on both, not condemned"),
    pytest.param(D, D, True, True, False, False, id="delete on both, condemned"),
    pytest.param(D, D, True, False, False, True, id="unexpected controller"),
])
def test_updated_claim_owner_refs(scaled: str, deleted: str, condemned: bool, needs_pod: bool, needs_set: bool,
                                  unexpected: bool) -> None:
    sts = _set((scaled, deleted), 5, name="ss", uid="ss-123")
    pod = pod_named("pod-8" if condemned else "pod-1", uid="pod-456")
    for variation in range(8):
        refs: list[dict[str, Any]] = []
        if variation & 1:
            refs.append(_controller(pod, "v1", "Pod"))
        if variation & 2:
            refs.append(_controller(sts, "apps/v1", "StatefulSet"))
        if variation & 3:
            refs.append({"apiVersion": "custom/v1", "kind": "random", "name": "random", "uid": "abc"})
        if unexpected:
            refs.append({"apiVersion": "custom/v1", "kind": "Unknown", "name": "unknown", "uid": "xyz",
                         "controller": True})
        new_refs = retention.updated_claim_owner_refs({"metadata": {"ownerReferences": refs}}, sts, pod)

        def controls(uid: str, refs: list[Any] = new_refs) -> bool:
            return any(r.get("uid") == uid and r.get("controller") is True for r in refs)

        assert controls("pod-456") is needs_pod, variation
        assert controls("ss-123") is needs_set, variation


# --- status ----------------------------------------------------------------------------------------


def test_complete_rolling_update_and_inconsistent_status() -> None:
    sts = new_stateful_set(3)
    s = status.StatefulSetStatus(observed_generation=1, replicas=3, ready_replicas=3, updated_replicas=3,
                                 current_replicas=1, current_revision="a", update_revision="b")
    status.complete_rolling_update(sts, s)
    assert (s.current_replicas, s.current_revision) == (3, "b")
    sts["status"] = s.as_dict()
    assert not status.inconsistent_status(sts, s)
    assert sts["status"] == {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "currentReplicas": 3,
                             "updatedReplicas": 3, "currentRevision": "b", "updateRevision": "b",
                             "collisionCount": 0, "availableReplicas": 0}
    s.available_replicas = 3
    assert status.inconsistent_status(sts, s)
    on_delete = new_stateful_set(3, strategy={"type": "OnDelete"})
    s2 = status.StatefulSetStatus(replicas=3, ready_replicas=3, updated_replicas=3, current_revision="a",
                                  update_revision="b")
    status.complete_rolling_update(on_delete, s2)
    assert s2.current_revision == "a"
