"""What the binder knows about volumes and claims without asking anyone (``k8s.io/component-helpers/storage/volume``
and ``pkg/volume/util``): the annotations, a claim's and a volume's class, access and volume mode checks, the
claim a volume is bound to, the volume that best fits a claim, the default StorageClass, and the in-tree
provisioner names that CSI migration hands to a CSI driver.

All functions are pure: they read the objects they are given (plain dicts as the API returns them) and never
mutate them.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from decimal import Decimal
from typing import Any

from controller_manager.api.meta import meta, parse_time
from controller_manager.api.quantity import parse_quantity
from controller_manager.api.selectors import InvalidSelector, from_label_selector
from controller_manager.controllerutil.nodeaffinity import match_node_selector_terms

Obj = Mapping[str, Any]

# --- annotations and finalizers (component-helpers/storage/volume/helpers.go) --------------------------------

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"
ANN_MIGRATED_TO = "pv.kubernetes.io/migrated-to"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ANN_PRE_RESIZE_CAPACITY = "volume.alpha.kubernetes.io/pre-resize-capacity"
ANN_DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
ANN_BETA_DEFAULT_CLASS = "storageclass.beta.kubernetes.io/is-default-class"
# HonorPVReclaimPolicy (GA): the in-tree deleter's finalizer and the external provisioner's.
PV_DELETION_IN_TREE_PROTECTION_FINALIZER = "kubernetes.io/pv-controller"
PV_DELETION_PROTECTION_FINALIZER = "external-provisioner.volume.kubernetes.io/finalizer"

NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

# csi-translation-lib: the in-tree plugins whose CSI migration is on (locked to on in 1.37) and their drivers.
CSI_MIGRATED_PLUGINS: Mapping[str, str] = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
}


def annotations_of(obj: Obj) -> Mapping[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def has_annotation(obj: Obj, key: str) -> bool:
    return key in annotations_of(obj)


def spec(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def status(obj: Obj) -> Mapping[str, Any]:
    value = obj.get("status")
    return value if isinstance(value, Mapping) else {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def uid_of(obj: Obj) -> str:
    return str(meta(obj).get("uid") or "")


def claim_key(claim: Obj) -> str:
    return f"{meta(claim).get('namespace') or ''}/{name_of(claim)}"


def claim_ref(volume: Obj) -> Mapping[str, Any] | None:
    ref = spec(volume).get("claimRef")
    return ref if isinstance(ref, Mapping) else None


def claim_ref_key(ref: Mapping[str, Any]) -> str:
    return f"{ref.get('namespace') or ''}/{ref.get('name') or ''}"


def volume_phase(volume: Obj) -> str:
    return str(status(volume).get("phase") or "")


def claim_phase(claim: Obj) -> str:
    return str(status(claim).get("phase") or "")


def volume_name_of_claim(claim: Obj) -> str:
    return str(spec(claim).get("volumeName") or "")


def reclaim_policy(volume: Obj) -> str:
    return str(spec(volume).get("persistentVolumeReclaimPolicy") or "")


# --- classes ---------------------------------------------------------------------------------------------------

def claim_class(claim: Obj) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation first, then ``spec.storageClassName``, else ""."""
    ann = annotations_of(claim)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    value = spec(claim).get("storageClassName")
    return str(value) if value is not None else ""


def claim_has_class(claim: Obj) -> bool:
    """``PersistentVolumeClaimHasClass``: the annotation or a ``storageClassName``, even an empty one."""
    return has_annotation(claim, ANN_BETA_STORAGE_CLASS) or spec(claim).get("storageClassName") is not None


def volume_class(volume: Obj) -> str:
    """``GetPersistentVolumeClass``."""
    ann = annotations_of(volume)
    if ANN_BETA_STORAGE_CLASS in ann:
        return str(ann[ANN_BETA_STORAGE_CLASS])
    return str(spec(volume).get("storageClassName") or "")


def claim_vac(claim: Obj) -> str:
    return str(spec(claim).get("volumeAttributesClassName") or "")


def volume_vac(volume: Obj) -> str:
    return str(spec(volume).get("volumeAttributesClassName") or "")


def is_default_class(storage_class: Obj) -> bool:
    ann = annotations_of(storage_class)
    return ann.get(ANN_DEFAULT_CLASS) == "true" or ann.get(ANN_BETA_DEFAULT_CLASS) == "true"


def default_class(classes: Iterable[Obj]) -> Obj | None:
    """``GetDefaultClass``: of the classes annotated default, the newest (then the first by name)."""
    defaults = [c for c in classes if is_default_class(c)]
    if not defaults:
        return None

    def order(c: Obj) -> tuple[float, str]:
        created = parse_time(meta(c).get("creationTimestamp")) or 0.0
        return (-created, name_of(c))

    return sorted(defaults, key=order)[0]


class ClassLookupError(Exception):
    """A StorageClass cannot be used (upstream's message as ``str()``)."""


def is_delay_binding_mode(claim: Obj, get_class: Any) -> bool:
    """``IsDelayBindingMode``: the claim's class (if it exists) binds WaitForFirstConsumer.

    ``get_class(name)`` returns the StorageClass or None. A class without a binding mode is an error."""
    name = claim_class(claim)
    if not name:
        return False
    storage_class = get_class(name)
    if storage_class is None:
        return False
    mode = storage_class.get("volumeBindingMode")
    if mode is None:
        raise ClassLookupError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return bool(mode == "WaitForFirstConsumer")


def is_delay_binding_provisioning(claim: Obj) -> bool:
    """``IsDelayBindingProvisioning``: the scheduler picked a node for provisioning."""
    return has_annotation(claim, ANN_SELECTED_NODE)


# --- matching ---------------------------------------------------------------------------------------------

def _storage(resources: Any) -> Decimal:
    if not isinstance(resources, Mapping) or resources.get("storage") is None:
        return Decimal(0)
    try:
        return parse_quantity(resources["storage"])
    except ValueError:
        return Decimal(0)


def requested_storage(claim: Obj) -> Decimal:
    resources = spec(claim).get("resources")
    return _storage(resources.get("requests") if isinstance(resources, Mapping) else None)


def volume_capacity(volume: Obj) -> Decimal:
    return _storage(spec(volume).get("capacity"))


def volume_mode_mismatches(claim_spec: Mapping[str, Any], volume_spec: Mapping[str, Any]) -> bool:
    """``CheckVolumeModeMismatches``: an unset mode is Filesystem on either side."""
    return (claim_spec.get("volumeMode") or "Filesystem") != (volume_spec.get("volumeMode") or "Filesystem")


def access_modes_fit(claim: Obj, volume: Obj) -> bool:
    """``CheckAccessModes``: every mode the claim asks for is one the volume offers."""
    offered = set(spec(volume).get("accessModes") or ())
    return all(mode in offered for mode in spec(claim).get("accessModes") or ())


def is_volume_bound_to_claim(volume: Obj, claim: Obj) -> bool:
    """``IsVolumeBoundToClaim``: the claimRef names this claim, and its UID, if any, is the claim's."""
    ref = claim_ref(volume)
    if ref is None:
        return False
    if ref.get("name") != name_of(claim) or ref.get("namespace") != meta(claim).get("namespace"):
        return False
    ref_uid = ref.get("uid") or ""
    return not (ref_uid and ref_uid != uid_of(claim))


def check_volume_satisfies_claim(volume: Obj, claim: Obj) -> str | None:
    """``checkVolumeSatisfyClaim``: None if the requested volume fits the claim, else why not."""
    if meta(volume).get("deletionTimestamp") is not None:
        return f'the volume is marked for deletion "{name_of(volume)}"'
    if _int_value(volume_capacity(volume)) < _int_value(requested_storage(claim)):
        return "requested PV is too small"
    if volume_class(volume) != claim_class(claim):
        return "storageClassName does not match"
    if claim_vac(claim) != volume_vac(volume):
        return "volumeAttributesClassName does not match"
    if volume_mode_mismatches(spec(claim), spec(volume)):
        return "incompatible volumeMode"
    if not access_modes_fit(claim, volume):
        return "incompatible accessMode"
    return None


def _int_value(quantity: Decimal) -> int:
    """``Quantity.Value()``: rounded up to an integer."""
    whole = int(quantity)
    return whole + 1 if quantity > whole else whole


class SelectorError(Exception):
    """The claim's label selector cannot be parsed."""


def node_affinity_matches(volume: Obj, node: Obj) -> bool:
    """``CheckNodeAffinity``: a volume without required node affinity fits every node; otherwise one of its
    node selector terms must select the node. As upstream, the node is judged by its labels alone (it builds a
    nameless node from them), so ``matchFields`` never narrow a volume's nodes here."""
    affinity = spec(volume).get("nodeAffinity")
    required = affinity.get("required") if isinstance(affinity, Mapping) else None
    if not isinstance(required, Mapping):
        return True
    labels = meta(node).get("labels")
    return match_node_selector_terms(required.get("nodeSelectorTerms"), "",
                                     labels if isinstance(labels, Mapping) else {})


def find_matching_volume(claim: Obj, volumes: Iterable[Obj], *, delay_binding: bool, node: Obj | None = None,
                         excluded: Container[str] = ()) -> Obj | None:
    """``FindMatchingVolume``: the volume pre-bound to ``claim`` if there is one, else the smallest Available
    volume that fits it (size, volume mode, class, volume attributes class, selector; with a node, as the
    scheduler asks, also node affinity and access modes). Without a node, a delay-binding claim only gets a
    volume pre-bound to it: the scheduler binds the others. ``excluded`` names volumes not to consider."""
    requested = requested_storage(claim)
    requested_class = claim_class(claim)
    selector = None
    raw_selector = spec(claim).get("selector")
    if raw_selector is not None:
        try:
            selector = from_label_selector(raw_selector)
        except InvalidSelector as err:
            raise SelectorError(f'error creating internal label selector for claim: "{claim_key(claim)}": {err}') \
                from err
    smallest: Obj | None = None
    smallest_size = Decimal(0)
    for volume in volumes:
        if name_of(volume) in excluded:
            continue
        if claim_ref(volume) is not None and not is_volume_bound_to_claim(volume, claim):
            continue
        size = volume_capacity(volume)
        if size < requested:
            continue
        if volume_mode_mismatches(spec(claim), spec(volume)):
            continue
        if meta(volume).get("deletionTimestamp") is not None:
            continue
        affinity_ok = node is None or node_affinity_matches(volume, node)
        if is_volume_bound_to_claim(volume, claim):
            return volume if affinity_ok else None
        if node is None and delay_binding:
            continue
        if volume_phase(volume) != "Available":
            continue
        if selector is not None:
            labels = meta(volume).get("labels")
            if not selector.matches(labels if isinstance(labels, Mapping) else {}):
                continue
        if volume_class(volume) != requested_class:
            continue
        if claim_vac(claim) != volume_vac(volume):
            continue
        if not affinity_ok:
            continue
        if node is not None and not access_modes_fit(claim, volume):
            continue
        if smallest is None or smallest_size > size:
            smallest, smallest_size = volume, size
    return smallest


_MODE_ORDER = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
               ("ReadWriteOncePod", "RWOP"))


def find_best_match_for_claim(claim: Obj, volumes: Iterable[Obj], *, delay_binding: bool) -> Obj | None:
    """``persistentVolumeOrderedIndex.findBestMatchForClaim``: volumes are grouped by their exact set of access
    modes; the groups whose modes include all the claim asks for are searched fewest modes first, and the first
    group with a match (:func:`find_matching_volume`) wins: a claim gets the volume with the least surplus of
    access modes, then the smallest."""
    groups: dict[str, list[Obj]] = {}
    for volume in volumes:
        groups.setdefault(access_modes_key(spec(volume).get("accessModes") or ()), []).append(volume)
    wanted = set(spec(claim).get("accessModes") or ())
    candidates = [key for key in groups if wanted <= set(_modes_from_key(key))]
    candidates.sort(key=lambda key: (len(_modes_from_key(key)), key))
    for key in candidates:
        found = find_matching_volume(claim, groups[key], delay_binding=delay_binding)
        if found is not None:
            return found
    return None


def _modes_from_key(key: str) -> list[str]:
    short_to_full = {short: full for full, short in _MODE_ORDER}
    return [short_to_full[s.strip()] for s in key.split(",") if s.strip() in short_to_full]


def access_modes_key(modes: Iterable[str]) -> str:
    """``GetAccessModesAsString``: the short names in upstream's order (RWO, ROX, RWX, RWOP)."""
    present = set(modes)
    return ",".join(s for full, s in _MODE_ORDER if full in present)


def claim_reference(claim: Obj) -> dict[str, Any]:
    """``reference.GetReference`` of a claim: what a bound volume's ``claimRef`` holds."""
    m = meta(claim)
    ref: dict[str, Any] = {"kind": "PersistentVolumeClaim", "namespace": m.get("namespace") or "",
                           "name": m.get("name") or "", "uid": m.get("uid") or "", "apiVersion": "v1"}
    if m.get("resourceVersion"):
        ref["resourceVersion"] = m["resourceVersion"]
    return {k: v for k, v in ref.items() if v != ""}


def pod_claim_names(pod: Obj) -> list[str]:
    """The claims a pod's volumes use, ``namespace/name`` (a generic ephemeral volume's claim is
    ``<pod>-<volume>``): ``common.PodPVCIndexFunc``."""
    m = meta(pod)
    namespace = m.get("namespace") or ""
    keys = []
    for volume in spec(pod).get("volumes") or ():
        if not isinstance(volume, Mapping):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping) and source.get("claimName"):
            keys.append(f"{namespace}/{source['claimName']}")
        elif volume.get("ephemeral") is not None:
            keys.append(f"{namespace}/{m.get('name') or ''}-{volume.get('name') or ''}")
    return keys


def is_pod_terminated(pod: Obj) -> bool:
    """``util.IsPodTerminated``: Failed or Succeeded, or being deleted with every container terminated or waiting."""
    st = status(pod)
    phase = st.get("phase")
    if phase in ("Failed", "Succeeded"):
        return True
    if meta(pod).get("deletionTimestamp") is None:
        return False
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in st.get(key) or ():
            state = cs.get("state") if isinstance(cs, Mapping) else None
            state = state if isinstance(state, Mapping) else {}
            if state.get("terminated") is None and state.get("waiting") is None:
                return False  # running (or no state at all), as notRunning reads it
    return True
