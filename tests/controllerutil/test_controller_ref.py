"""ControllerRefManager claim/adopt/release (ported from controller_ref_manager_test.go)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller_manager.api.resources import CONTROLLERREVISIONS, DAEMONSETS, PODS, REPLICASETS
from controller_manager.api.selectors import from_set
from controller_manager.client.errors import Conflict, Invalid, NotFound, ServerError
from controller_manager.controllerutil.controller_ref import (
    ClaimError,
    ControllerRefManager,
    delete_owner_ref_patch,
    live_owner_check,
    new_controller_ref,
    owner_ref_controller_patch,
    recheck_deletion_timestamp,
    validate_controller_ref,
)
from controller_manager.sim.apiserver.server import ApiServer
from tests.runtime.fakes import FakeClient, SimClient

PRODUCTION = {"type": "production"}
TESTING = {"type": "testing"}
SELECTOR = from_set(PRODUCTION)
OWNER_UID = "123"
DELETED_AT = "2024-01-01T00:00:00Z"


def owner(uid: str = OWNER_UID, deleting: bool = False, namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rs", "namespace": namespace, "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    return {"metadata": meta}


def pod(name: str, labels: dict[str, str], owned_by: dict[str, Any] | None = None, deleting: bool = False,
        namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels, "uid": f"uid-{name}"}
    if owned_by is not None:
        meta["ownerReferences"] = [new_controller_ref(owned_by, REPLICASETS)]
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "foo/bar"}]}}


async def allow() -> None:
    return None


def manager(client: FakeClient, the_owner: dict[str, Any], can_adopt: Any = allow,
            finalizers: tuple[str, ...] = ()) -> ControllerRefManager:
    return ControllerRefManager(client, the_owner, REPLICASETS, SELECTOR, PODS, can_adopt, finalizers)


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


ME = owner()
OTHER = owner(uid="AAAAA")


@pytest.mark.parametrize(
    ("the_owner", "pods", "claimed", "patched"),
    [
        pytest.param(owner(uid=""), [pod("pod1", PRODUCTION), pod("pod2", TESTING)], ["pod1"], ["pod1"],
                     id="claim pods with correct label"),
        pytest.param(owner(deleting=True), [pod("pod1", PRODUCTION), pod("pod2", PRODUCTION)], [], [],
                     id="controller marked for deletion can not claim pods"),
        pytest.param(owner(deleting=True), [pod("pod1", PRODUCTION, ME), pod("pod2", PRODUCTION)], ["pod1"], [],
                     id="controller marked for deletion can not claim new pods"),
        pytest.param(ME, [pod("pod1", PRODUCTION, ME), pod("pod2", PRODUCTION, OTHER)], ["pod1"], [],
                     id="controller can not claim pods owned by another controller"),
        pytest.param(ME, [pod("pod1", PRODUCTION, ME), pod("pod2", TESTING, ME)], ["pod1"], ["pod2"],
                     id="controller releases claimed pods when selector does not match"),
        pytest.param(ME, [pod("pod1", PRODUCTION, ME, deleting=True), pod("pod2", PRODUCTION, deleting=True)],
                     ["pod1"], [], id="controller does not claim orphaned pods marked for deletion"),
        pytest.param(owner(deleting=True), [pod("pod1", TESTING, owner(deleting=True))], [], [],
                     id="controller being deleted does not release"),
        pytest.param(ME, [pod("pod1", PRODUCTION, namespace="other")], [], [],
                     id="orphans in another namespace are not adopted"),
    ],
)
async def test_claim_pods(the_owner: dict[str, Any], pods: list[dict[str, Any]], claimed: list[str],
                          patched: list[str]) -> None:
    client = FakeClient()
    got = await manager(client, the_owner).claim(pods)
    assert names(got) == claimed
    assert [c.name for c in client.of("patch")] == patched
    assert all(c.options["patch_type"] == "strategic" for c in client.of("patch"))


async def test_adopt_and_release_patches_with_finalizers() -> None:
    # "Controller claims or release pods according to selector with finalizers"
    client = FakeClient()
    m = manager(client, ME, finalizers=("foo-finalizer", "bar-finalizer"))
    got = await m.claim([pod("pod1", PRODUCTION), pod("pod2", TESTING, ME), pod("pod3", PRODUCTION, ME)])
    assert [c.name for c in client.of("patch")] == ["pod1", "pod2"]
    adopt, release = client.of("patch")
    assert adopt.body == {"metadata": {
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": OWNER_UID,
                             "controller": True, "blockOwnerDeletion": True}],
        "uid": "uid-pod1",
        "finalizers": ["foo-finalizer", "bar-finalizer"],
    }}
    assert release.body == {"metadata": {
        "uid": "uid-pod2",
        "ownerReferences": [{"$patch": "delete", "uid": OWNER_UID}],
        "$deleteFromPrimitiveList/finalizers": ["foo-finalizer", "bar-finalizer"],
    }}
    # The adopted pod is the API's answer (it now carries our ref); the owned one is returned as given.
    assert got[0]["metadata"].get("patched") is True
    assert names(got) == ["pod1", "pod3"]


async def test_filters_restrict_matches() -> None:
    client = FakeClient()
    keep_even: Callable[[Any], bool] = lambda p: p["metadata"]["name"].endswith(("2", "4"))  # noqa: E731
    got = await manager(client, ME).claim(
        [pod("pod1", PRODUCTION), pod("pod2", PRODUCTION), pod("pod3", PRODUCTION, ME), pod("pod4", PRODUCTION, ME)],
        filters=[keep_even],
    )
    assert names(got) == ["pod2", "pod4"]
    assert [c.name for c in client.of("patch")] == ["pod2", "pod3"]  # adopt pod2, release pod3


async def test_live_check_runs_once_per_manager() -> None:
    client = FakeClient()
    calls = 0

    async def check() -> None:
        nonlocal calls
        calls += 1

    m = manager(client, ME, can_adopt=check)
    got = await m.claim([pod(f"pod{i}", PRODUCTION) for i in range(3)])
    assert names(got) == ["pod0", "pod1", "pod2"]
    assert calls == 1
    await m.claim([pod("pod9", PRODUCTION)])
    assert calls == 1


async def test_live_check_refusal_blocks_every_adoption_but_keeps_owned() -> None:
    client = FakeClient()
    calls = 0

    async def refuse() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("default/rs has just been deleted at 2024-01-01T00:00:00Z")

    m = manager(client, ME, can_adopt=refuse)
    with pytest.raises(ClaimError) as info:
        await m.claim([pod("pod1", PRODUCTION), pod("pod2", PRODUCTION, ME), pod("pod3", PRODUCTION)])
    assert calls == 1
    assert client.of("patch") == []
    assert names(info.value.claimed) == ["pod2"]
    assert [str(e) for e in info.value.errors] == [
        "can't adopt Pod default/pod1 (uid-pod1): default/rs has just been deleted at 2024-01-01T00:00:00Z",
        "can't adopt Pod default/pod3 (uid-pod3): default/rs has just been deleted at 2024-01-01T00:00:00Z",
    ]
    assert str(info.value).startswith("[can't adopt Pod default/pod1")


@pytest.mark.parametrize(
    ("verb_target", "error", "claimed", "fails"),
    [
        pytest.param("orphan", NotFound(404, "NotFound", 'pods "orphan" not found'), [], False,
                     id="adopting a vanished pod is not an error"),
        pytest.param("orphan", Conflict(409, "Conflict", "uid mismatch"), [], True, id="adopt conflict fails"),
        pytest.param("stray", NotFound(404, "NotFound", 'pods "stray" not found'), ["orphan"], False,
                     id="releasing a vanished pod is fine"),
        pytest.param("stray", Invalid(422, "Invalid", "uid mismatch"), ["orphan"], False,
                     id="releasing a replaced pod is fine"),
        pytest.param("stray", ServerError(500, "InternalError", "etcd"), ["orphan"], True,
                     id="release server error fails"),
    ],
)
async def test_patch_errors(verb_target: str, error: Exception, claimed: list[str], fails: bool) -> None:
    client = FakeClient()
    client.errors[("patch", verb_target)] = error
    pods = [pod("orphan", PRODUCTION), pod("stray", TESTING, ME)]
    m = manager(client, ME)
    if fails:
        with pytest.raises(ClaimError) as info:
            await m.claim(pods)
        assert info.value.errors == [error]
        assert names(info.value.claimed) == claimed
        assert str(info.value) == str(error)
    else:
        assert names(await m.claim(pods)) == claimed


async def test_generic_over_kinds() -> None:
    client = FakeClient()
    revision = {"metadata": {"name": "ds-abc", "namespace": "default", "uid": "r1", "labels": PRODUCTION}}
    ds = {"metadata": {"name": "ds", "namespace": "default", "uid": "d1"}}
    m = ControllerRefManager(client, ds, DAEMONSETS, SELECTOR, CONTROLLERREVISIONS, allow)
    assert len(await m.claim([revision])) == 1
    (call,) = client.of("patch")
    assert call.resource == "controllerrevisions"
    assert call.body["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"


# --- the live re-read ------------------------------------------------------------------------------


async def test_live_owner_check() -> None:
    client = FakeClient()
    check = live_owner_check(client, REPLICASETS, ME)

    client.objects[("replicasets", "rs")] = owner()
    await check()
    assert [(c.verb, c.resource, c.name, c.namespace) for c in client.calls] == [
        ("get", "replicasets", "rs", "default")]

    client.objects[("replicasets", "rs")] = owner(uid="new")
    with pytest.raises(RuntimeError, match=r"^can't recheck DeletionTimestamp: original ReplicaSet default/rs is "
                                           r"gone: got uid new, wanted 123$"):
        await check()

    client.objects[("replicasets", "rs")] = owner(deleting=True)
    with pytest.raises(RuntimeError, match=r"^default/rs has just been deleted at 2024-01-01T00:00:00Z$"):
        await check()

    client.errors[("get", "rs")] = NotFound(404, "NotFound", 'replicasets.apps "rs" not found')
    with pytest.raises(RuntimeError, match=r'^can\'t recheck DeletionTimestamp: replicasets.apps "rs" not found$'):
        await check()


async def test_recheck_deletion_timestamp_passes_live_owner() -> None:
    async def fresh() -> dict[str, Any]:
        return owner()

    await recheck_deletion_timestamp(fresh)()


# --- pure builders ---------------------------------------------------------------------------------


def test_patch_builders() -> None:
    ref = new_controller_ref(ME, REPLICASETS)
    assert owner_ref_controller_patch(ref, "u1") == {"metadata": {"ownerReferences": [ref], "uid": "u1"}}
    # TestGenerateDeleteOwnerRefStrategicMergeBytes-like: one delete directive per owner UID.
    assert delete_owner_ref_patch("dep", ["o1", "o2"]) == {"metadata": {
        "uid": "dep", "ownerReferences": [{"$patch": "delete", "uid": "o1"}, {"$patch": "delete", "uid": "o2"}]}}


def test_new_controller_ref_uses_object_kind_without_resource() -> None:
    obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u"}}
    assert new_controller_ref(obj) == {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u",
                                       "controller": True, "blockOwnerDeletion": True}


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        pytest.param(None, "controllerRef is nil", id="nil"),
        pytest.param({"kind": "ReplicaSet", "controller": True, "blockOwnerDeletion": True},
                     "controllerRef has empty APIVersion", id="no apiVersion"),
        pytest.param({"apiVersion": "apps/v1", "controller": True, "blockOwnerDeletion": True},
                     "controllerRef has empty Kind", id="no kind"),
        pytest.param({"apiVersion": "apps/v1", "kind": "ReplicaSet", "blockOwnerDeletion": True},
                     "controllerRef.Controller is not set to true", id="not controller"),
        pytest.param({"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True},
                     "controllerRef.BlockOwnerDeletion is not set", id="no blockOwnerDeletion"),
    ],
)
def test_validate_controller_ref(ref: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        validate_controller_ref(ref)


# --- against kube-sim's API server (real strategic merge, preconditions and deletion) ---------------


RS_SPEC = {"replicas": 1, "selector": {"matchLabels": PRODUCTION},
           "template": {"metadata": {"labels": PRODUCTION}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}


@pytest.fixture
def sim() -> Any:
    return SimClient(ApiServer())


async def sim_pod(sim: Any, name: str, labels: dict[str, str], refs: list[dict[str, Any]] | None = None
                  ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels}
    if refs:
        meta["ownerReferences"] = refs
    return await sim.create(PODS, {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                            "default")


async def test_sim_adopt_keeps_other_refs_and_release_removes_only_ours(sim: Any) -> None:
    rs = await sim.create(REPLICASETS, {"metadata": {"name": "rs", "namespace": "default"}, "spec": RS_SPEC},
                          "default")
    bystander = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"}
    orphan = await sim_pod(sim, "orphan", PRODUCTION, [bystander])

    m = ControllerRefManager(sim, rs, REPLICASETS, SELECTOR, PODS, live_owner_check(sim, REPLICASETS, rs))
    (claimed,) = await m.claim([orphan])
    stored = await sim.get(PODS, "orphan", "default")
    assert claimed["metadata"]["ownerReferences"] == stored["metadata"]["ownerReferences"]
    assert new_controller_ref(rs, REPLICASETS) in stored["metadata"]["ownerReferences"]
    assert bystander in stored["metadata"]["ownerReferences"]

    relabelled = await sim.patch(PODS, "orphan", {"metadata": {"labels": TESTING}}, "default")
    m = ControllerRefManager(sim, rs, REPLICASETS, SELECTOR, PODS, live_owner_check(sim, REPLICASETS, rs))
    assert await m.claim([relabelled]) == []
    assert (await sim.get(PODS, "orphan", "default"))["metadata"]["ownerReferences"] == [bystander]


async def test_sim_uid_precondition_protects_a_recreated_namesake(sim: Any) -> None:
    rs = await sim.create(REPLICASETS, {"metadata": {"name": "rs", "namespace": "default"}, "spec": RS_SPEC},
                          "default")
    cached = await sim_pod(sim, "p", PRODUCTION)  # what a stale cache still holds
    await sim.delete(PODS, "p", "default")
    await sim_pod(sim, "p", PRODUCTION)  # a new pod under the same name
    m = ControllerRefManager(sim, rs, REPLICASETS, SELECTOR, PODS, live_owner_check(sim, REPLICASETS, rs))
    with pytest.raises(ClaimError):
        await m.claim([cached])
    assert "ownerReferences" not in (await sim.get(PODS, "p", "default"))["metadata"]

    # Releasing through a stale object is harmless: the namesake keeps its owner.
    ours = await sim_pod(sim, "q", TESTING, [new_controller_ref(rs, REPLICASETS)])
    await sim.delete(PODS, "q", "default")
    await sim_pod(sim, "q", TESTING, [new_controller_ref(rs, REPLICASETS)])
    await m.claim([ours])
    namesake = await sim.get(PODS, "q", "default")
    assert namesake["metadata"]["ownerReferences"] == [new_controller_ref(rs, REPLICASETS)]


async def test_sim_live_check_refuses_deleting_or_replaced_owner(sim: Any) -> None:
    spec = {"metadata": {"name": "rs", "namespace": "default", "finalizers": ["example.com/hold"]}, "spec": RS_SPEC}
    rs = await sim.create(REPLICASETS, spec, "default")
    orphan = await sim_pod(sim, "orphan", PRODUCTION)
    await sim.delete(REPLICASETS, "rs", "default")  # held by the finalizer: deletionTimestamp set
    m = ControllerRefManager(sim, rs, REPLICASETS, SELECTOR, PODS, live_owner_check(sim, REPLICASETS, rs))
    with pytest.raises(ClaimError, match="has just been deleted at"):
        await m.claim([orphan])

    await sim.patch(REPLICASETS, "rs", {"metadata": {"finalizers": None}}, "default")
    await sim.create(REPLICASETS, {"metadata": {"name": "rs", "namespace": "default"}, "spec": RS_SPEC}, "default")
    m = ControllerRefManager(sim, rs, REPLICASETS, SELECTOR, PODS, live_owner_check(sim, REPLICASETS, rs))
    with pytest.raises(ClaimError, match="is gone: got uid"):
        await m.claim([orphan])
    assert "ownerReferences" not in (await sim.get(PODS, "orphan", "default"))["metadata"]
