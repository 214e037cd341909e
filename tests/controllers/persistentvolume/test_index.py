"""Upstream's ``index_test.go``: findBestMatchForClaim (access-mode groups, size, class, selector, pre-binding,
delayed binding), FindMatchingVolume with a node (node affinity, exclusions), access and volume mode checks, and
the deletion-timestamp filter."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.persistentvolume.helpers import (
    access_modes_fit,
    check_volume_satisfies_claim,
    claim_reference,
    find_best_match_for_claim,
    find_matching_volume,
    node_affinity_matches,
    volume_mode_mismatches,
)

RWO, ROX, RWX = "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"
Obj = dict[str, Any]


def pv(uid: str, name: str, size: str, modes: list[str], *, source: str = "gcePersistentDisk", klass: str = "",
       labels: dict[str, str] | None = None, claim_ref: dict[str, str] | None = None, affinity: str | None = None,
       phase: str | None = "Available", mode: str | None = "Filesystem") -> Obj:
    volume: Obj = {"metadata": {"name": name, "uid": uid},
                   "spec": {"capacity": {"storage": size}, source: {}, "accessModes": modes},
                   "status": {"phase": phase} if phase else {}}
    if mode:
        volume["spec"]["volumeMode"] = mode
    if klass:
        volume["spec"]["storageClassName"] = klass
    if labels:
        volume["metadata"]["labels"] = labels
    if claim_ref is not None:
        volume["spec"]["claimRef"] = claim_ref
    if affinity is not None:  # pvutil.GetVolumeNodeAffinity("key1", affinity)
        volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "key1", "operator": "In", "values": [affinity]}]}]}}
    return volume


def make_test_volumes() -> list[Obj]:
    """``createTestVolumes``: deliberately out of order."""
    return [
        pv("gce-pd-10", "gce003", "10G", [RWO, ROX]),
        pv("gce-pd-20", "gce004", "20G", [RWO, ROX], claim_ref={"uid": "def456"}, phase="Bound"),
        pv("nfs-5", "nfs002", "5G", [RWO, ROX, RWX], source="glusterfs"),
        pv("gce-pd-1", "gce001", "1G", [RWO, ROX], claim_ref={"uid": "abc123"}, phase="Bound"),
        pv("nfs-10", "nfs003", "10G", [RWO, ROX, RWX], source="glusterfs"),
        pv("gce-pd-5", "gce002", "5G", [RWO, ROX]),
        pv("nfs-1", "nfs001", "1G", [RWO, ROX, RWX], source="glusterfs"),
        pv("gce-pd-2", "gce0022", "20000G", [RWO], labels={"should-exist": "true"}),
        pv("gce-pd-silver1", "gce0023", "10000G", [RWO], klass="silver", labels={"should-exist": "true"}),
        pv("gce-pd-silver2", "gce0024", "100G", [RWO], klass="silver"),
        pv("gce-pd-gold", "gce0025", "50G", [RWO], klass="gold"),
        pv("local-pd-very-large", "local001", "200E", [RWO, ROX, RWX], source="local", klass="large"),
        pv("local-pd-extremely-large", "local002", "800E", [RWO, ROX, RWX], source="local", klass="large"),
        pv("affinity-pv", "affinity001", "100G", [RWO, ROX], source="local", klass="wait", affinity="value1"),
        pv("affinity-pv2", "affinity002", "150G", [RWO, ROX], source="local", klass="wait", affinity="value1"),
        pv("affinity-prebound", "affinity003", "100G", [RWO, ROX], source="local", klass="wait",
           claim_ref={"name": "claim02", "namespace": "myns"}, affinity="value1"),
        pv("affinity-pv3", "affinity003", "200G", [RWO, ROX], source="local", klass="wait", affinity="value3"),
        pv("affinity-pv4-pending", "affinity004-pending", "200G", [RWO, ROX], source="local", klass="wait",
           affinity="value4", phase="Pending"),
        pv("affinity-pv4-failed", "affinity004-failed", "200G", [RWO, ROX], source="local", klass="wait",
           affinity="value4", phase="Failed"),
        pv("affinity-pv4-released", "affinity004-released", "200G", [RWO, ROX], source="local", klass="wait",
           affinity="value4", phase="Released"),
        pv("affinity-pv4-empty", "affinity004-empty", "200G", [RWO, ROX], source="local", klass="wait",
           affinity="value4", phase=None),
    ]


def indexed(volumes: list[Obj]) -> list[Obj]:
    """The index is keyed by name (a store): a later volume with a name already seen replaces it."""
    by_name: dict[str, Obj] = {}
    for volume in volumes:
        by_name[volume["metadata"]["name"]] = volume
    return list(by_name.values())


def pvc(size: str, *, modes: list[str] | None = None, klass: str | None = None, name: str = "claim01",
        selector: dict[str, str] | None = None, mode: str | None = "Filesystem") -> Obj:
    claim: Obj = {"metadata": {"name": name, "namespace": "myns"},
                  "spec": {"accessModes": modes if modes is not None else [ROX, RWO],
                           "resources": {"requests": {"storage": size}}}}
    if mode:
        claim["spec"]["volumeMode"] = mode
    if klass is not None:
        claim["spec"]["storageClassName"] = klass
    if selector is not None:
        claim["spec"]["selector"] = {"matchLabels": selector}
    return claim


def _uid(volume: Obj | None) -> str:
    return "" if volume is None else volume["metadata"]["uid"]


MATCH_SCENARIOS = {
    "successful-match-gce-10": ("gce-pd-10", pvc("8G")),
    "successful-match-nfs-5": ("nfs-5", pvc("5G", modes=[ROX, RWO, RWX])),
    "successful-skip-1g-bound-volume": ("gce-pd-5", pvc("1G")),
    "successful-no-match": ("", pvc("999G")),
    "successful-no-match-due-to-label": ("", pvc("999G", selector={"should-not-exist": "true"})),
    "successful-no-match-due-to-size-constraint-with-label-selector":
        ("", pvc("20000G", selector={"should-exist": "true"}, modes=[ROX, RWO])),
    "successful-match-due-with-constraint-and-label-selector":
        ("gce-pd-2", pvc("20000G", selector={"should-exist": "true"}, modes=[RWO])),
    "successful-match-with-class": ("gce-pd-silver1", pvc("1G", selector={"should-exist": "true"}, modes=[RWO],
                                                          klass="silver")),
    "successful-match-with-class-and-labels": ("gce-pd-silver2", pvc("1G", modes=[RWO], klass="silver")),
    "successful-match-very-large": ("local-pd-very-large", pvc("1E", modes=[RWO], klass="large")),
    "successful-match-exact-extremely-large": ("local-pd-extremely-large", pvc("800E", modes=[RWO], klass="large")),
    "successful-no-match-way-too-large": ("", pvc("950E", modes=[RWO], klass="large")),
}


@pytest.mark.parametrize("name", sorted(MATCH_SCENARIOS))
def test_match_volume(name: str) -> None:
    expected, claim = MATCH_SCENARIOS[name]
    assert _uid(find_best_match_for_claim(claim, indexed(make_test_volumes()), delay_binding=False)) == expected


def test_matching_with_bound_volumes() -> None:
    bound = pv("gce-pd-1", "gce001", "1G", [RWO, ROX], claim_ref={"uid": "abc123"}, phase="Bound")
    free = pv("gce-pd-2", "gce002", "1G", [RWO, ROX])
    volume = find_best_match_for_claim(pvc("1G"), [bound, free], delay_binding=False)
    assert volume is not None
    assert volume["metadata"]["name"] == "gce002"


def test_finding_volume_with_different_access_modes() -> None:
    gce = pv("001", "gce", "10G", [RWO, ROX])
    ebs = pv("002", "ebs", "10G", [RWO], source="awsElasticBlockStore")
    nfs = pv("003", "nfs", "10G", [RWO, ROX, RWX], source="nfs")
    volumes = [gce, ebs, nfs]

    def best(modes: list[str]) -> str:
        volume = find_best_match_for_claim(pvc("1G", modes=modes), volumes, delay_binding=False)
        assert volume is not None
        return str(volume["metadata"]["name"])

    assert best([RWO]) == "ebs"
    assert best([RWO, ROX]) == "gce"
    assert best([RWX, RWO, ROX]) == "nfs"  # the order of the requested modes does not matter
    assert best([RWX]) == "nfs"  # fewer modes requested still match
    ebs["spec"]["claimRef"] = {}  # the exact match is bound: the next level up of modes
    assert best([RWO]) == "gce"
    gce["spec"]["claimRef"] = {}
    assert best([RWO]) == "nfs"
    del gce["spec"]["claimRef"]
    assert best([ROX]) == "gce"  # partial mode request


def host_path_volume(name: str, size: str) -> Obj:
    """``testVolume``."""
    return pv("", name, size, [RWO], source="hostPath")


def test_finding_prebound_volumes() -> None:
    claim = pvc("1Gi", modes=[RWO])
    claim["metadata"]["uid"] = "claim01-uid"
    ref = claim_reference(claim)
    pv1, pv5, pv8 = host_path_volume("pv1", "1Gi"), host_path_volume("pv5", "5Gi"), host_path_volume("pv8", "8Gi")
    bad_size = host_path_volume("pvBadSize", "1Mi")
    bad_mode = host_path_volume("pvBadMode", "1Gi")
    bad_mode["spec"]["accessModes"] = [ROX]
    volumes = [pv1, pv5, pv8, bad_size, bad_mode]

    def best() -> str:
        volume = find_best_match_for_claim(claim, volumes, delay_binding=False)
        assert volume is not None
        return str(volume["metadata"]["name"])

    assert best() == "pv1"  # exact match on size
    pv1["spec"]["claimRef"] = {"name": "foo", "namespace": "bar"}
    assert best() == "pv5"  # the exact match is pre-bound elsewhere: the next size up
    del pv1["spec"]["claimRef"]
    pv8["spec"]["claimRef"] = ref
    assert best() == "pv8"  # the largest is pre-bound to the claim
    del pv8["spec"]["claimRef"]
    bad_size["spec"]["claimRef"] = ref
    assert best() == "pv1"  # pre-bound but too small
    del bad_size["spec"]["claimRef"]
    bad_mode["spec"]["claimRef"] = ref
    assert best() == "pv1"  # pre-bound without the right access mode


def test_best_match_delayed() -> None:
    assert find_best_match_for_claim(pvc("8G"), indexed(make_test_volumes()), delay_binding=True) is None


def node(value: str) -> Obj:
    return {"metadata": {"name": "", "labels": {"key1": value}}}


WITH_NODE = {
    "success-match": ("affinity-pv", pvc("100G", modes=[RWO], klass="wait"), node("value1"), ()),
    "success-prebound": ("affinity-prebound", pvc("100G", modes=[RWO], klass="wait", name="claim02"), node("value1"),
                         ()),
    "success-exclusion": ("affinity-pv2", pvc("100G", modes=[RWO], klass="wait"), node("value1"), ("affinity001",)),
    "fail-exclusion": ("", pvc("100G", modes=[RWO], klass="wait"), node("value1"), ("affinity001", "affinity002")),
    "fail-accessmode": ("", pvc("100G", modes=[RWX], klass="wait"), node("value1"), ()),
    "fail-nodeaffinity": ("", pvc("100G", modes=[RWO], klass="wait"), node("value2"), ()),
    "fail-prebound-node-affinity": ("", pvc("100G", modes=[RWO], klass="wait", name="claim02"), node("value3"), ()),
    "fail-nonavaiable": ("", pvc("100G", modes=[RWO], klass="wait", name="claim04"), node("value4"), ()),
    "success-bad-and-good-node-affinity": ("affinity-pv3", pvc("100G", modes=[RWO], klass="wait", name="claim03"),
                                           node("value3"), ()),
}


@pytest.mark.parametrize("name", sorted(WITH_NODE))
def test_find_match_volume_with_node(name: str) -> None:
    expected, claim, with_node, excluded = WITH_NODE[name]
    volume = find_matching_volume(claim, make_test_volumes(), delay_binding=True, node=with_node, excluded=excluded)
    assert _uid(volume) == expected


def _affine(*terms: Obj) -> Obj:
    return {"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": list(terms)}}}}


@pytest.mark.parametrize(("volume", "fits"), [
    pytest.param({"spec": {}}, True, id="no node affinity"),
    pytest.param({"spec": {"nodeAffinity": {}}}, True, id="no required terms"),
    pytest.param(_affine({"matchExpressions": [{"key": "key1", "operator": "In", "values": ["value1"]}]}), True,
                 id="label in"),
    pytest.param(_affine({"matchExpressions": [{"key": "key1", "operator": "NotIn", "values": ["value1"]}]}),
                 False, id="label not in"),
    pytest.param(_affine({"matchExpressions": [{"key": "key1", "operator": "In", "values": []}]},
                         {"matchExpressions": [{"key": "key1", "operator": "Exists"}]}), True,
                 id="a term that does not parse, and one that fits"),
    pytest.param(_affine(), False, id="required without terms"),
    pytest.param(_affine({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]}), True,
                 id="judged by labels alone: matchFields do not narrow (a nameless node)"),
])
def test_check_node_affinity(volume: Obj, fits: bool) -> None:
    named = {"metadata": {"name": "node-a", "labels": {"key1": "value1"}}}
    assert node_affinity_matches(volume, named) is fits


@pytest.mark.parametrize(("modes", "fits"), [
    ([RWX], True), ([RWX, RWO], True), ([ROX], False), ([RWX, ROX], False)])
def test_check_access_modes(modes: list[str], fits: bool) -> None:
    volume = {"spec": {"accessModes": [RWO, RWX]}}
    assert access_modes_fit(pvc("100G", modes=modes), volume) is fits


BLOCK, FS = "Block", "Filesystem"


@pytest.mark.parametrize(("pvc_mode", "pv_mode", "mismatch"), [
    (BLOCK, FS, True), (FS, BLOCK, True), (BLOCK, BLOCK, False), (FS, FS, False), (FS, None, False),
    (None, FS, False), (None, None, False), (None, BLOCK, True), (BLOCK, None, True)])
def test_volume_mode_check(pvc_mode: str | None, pv_mode: str | None, mismatch: bool) -> None:
    claim = pvc("8G", modes=[RWO], mode=pvc_mode)
    volume = pv("local-1", "block", "10G", [RWO], source="local", mode=pv_mode)
    assert volume_mode_mismatches(claim["spec"], volume["spec"]) is mismatch


@pytest.mark.parametrize(("pvc_mode", "pv_mode", "match"), [
    (BLOCK, FS, False), (FS, BLOCK, False), (BLOCK, BLOCK, True), (FS, FS, True), (None, None, True)])
def test_filtering_volume_modes(pvc_mode: str | None, pv_mode: str | None, match: bool) -> None:
    claim = pvc("8G", modes=[RWO], mode=pvc_mode)
    volume = pv("local-1", "block", "10G", [RWO], source="local", mode=pv_mode)
    assert (find_best_match_for_claim(claim, [volume], delay_binding=False) is not None) is match


def test_storage_object_in_use_protection_filtering() -> None:
    volume = host_path_volume("pv1", "1G")
    deleting = copy.deepcopy(volume)
    deleting["metadata"]["deletionTimestamp"] = "2020-02-18T10:30:30Z"
    claim = pvc("1G", modes=[RWO])
    assert check_volume_satisfies_claim(volume, claim) is None
    assert check_volume_satisfies_claim(deleting, claim) == 'the volume is marked for deletion "pv1"'
    assert find_best_match_for_claim(claim, [volume], delay_binding=False) is volume
    assert find_best_match_for_claim(claim, [deleting], delay_binding=False) is None
