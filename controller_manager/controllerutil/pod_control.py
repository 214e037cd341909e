"""Creating, deleting and patching a controller's pods, with the events kube-controller-manager records.

Ports ``RealPodControl`` and ``GetPodFromTemplate`` from ``pkg/controller/controller_utils.go``.

Guarantees:
- :func:`pod_from_template` is pure: a new pod dict whose labels, annotations, finalizers and spec are
  copies of the template's (the template, often a cached object, is never mutated), with
  ``generateName: "<owner-name>-"`` and the controller ownerReference.
- :meth:`PodControl.create_pods` refuses a template without labels (``unable to create pods, no
  labels``) and an incomplete controller ref, before any API call. On success it records
  ``Normal SuccessfulCreate "Created pod: <name>"`` on the owner and returns the created pod; on
  failure ``Warning FailedCreate "Error creating: <err>"`` (skipped while the namespace is being
  terminated, as upstream) and re-raises the API error.
- :meth:`PodControl.delete_pod` records ``SuccessfulDelete "Deleted pod: <name>"`` or ``FailedDelete
  "Error deleting: <err>"``; NotFound is raised without an event (already gone), so callers can lower
  their expectations for it. A ``uid`` makes the delete conditional on that pod still being there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from controller_manager.api.meta import deep_copy, meta
from controller_manager.api.resources import PODS, Resource
from controller_manager.api.selectors import is_dns1123_subdomain
from controller_manager.client import ApiClient
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllerutil.controller_ref import new_controller_ref, validate_controller_ref
from controller_manager.controllerutil.sharding import inherit_shard_labels
from controller_manager.runtime.events import EventRecorder

__all__ = [
    "FAILED_CREATE_POD_REASON",
    "FAILED_DELETE_POD_REASON",
    "NAMESPACE_TERMINATING_CAUSE",
    "SUCCESSFUL_CREATE_POD_REASON",
    "SUCCESSFUL_DELETE_POD_REASON",
    "PodControl",
    "has_status_cause",
    "pod_from_template",
    "pods_prefix",
]

Obj = Mapping[str, Any]

# Event reasons (also used as ReplicaSet condition reasons).
FAILED_CREATE_POD_REASON = "FailedCreate"
SUCCESSFUL_CREATE_POD_REASON = "SuccessfulCreate"
FAILED_DELETE_POD_REASON = "FailedDelete"
SUCCESSFUL_DELETE_POD_REASON = "SuccessfulDelete"

_log = structlog.get_logger("controller_manager.pod_control")


def _mask_trailing_dash(name: str) -> str:
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def pods_prefix(controller_name: str) -> str:
    """``<name>-`` for generateName, or just ``<name>`` if the dash would make an invalid prefix."""
    prefix = f"{controller_name}-"
    if is_dns1123_subdomain(_mask_trailing_dash(prefix)):
        return controller_name
    return prefix


def pod_from_template(template: Obj, owner: Obj, ref: Mapping[str, Any] | None) -> dict[str, Any]:
    """A new pod for ``owner`` from its pod template (``GetPodFromTemplate``)."""
    tmeta = meta(template)
    metadata: dict[str, Any] = {"generateName": pods_prefix(str(meta(owner).get("name", "")))}
    # Sharding: the pod belongs to its owner's shard from creation (no label without sharding).
    labels = inherit_shard_labels(owner, tmeta.get("labels"))
    if labels:
        metadata["labels"] = labels
    annotations = tmeta.get("annotations")
    if annotations:
        metadata["annotations"] = dict(annotations)
    finalizers = tmeta.get("finalizers")
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    if ref is not None:
        metadata["ownerReferences"] = [dict(ref)]
    # The spec is nested and may be a shared cached object: the new pod gets its own copy.
    return {"metadata": metadata, "spec": deep_copy(dict(template.get("spec") or {}))}


class PodControl:
    """Pod writes on behalf of a controller, with upstream's events on the owner.

    ``owner_resource`` names the owners' kind (objects from a List carry no kind/apiVersion): it
    completes event references and the default controller ref.
    """

    def __init__(self, client: ApiClient, recorder: EventRecorder, owner_resource: Resource | None = None) -> None:
        self._client = client
        self._recorder = recorder
        self._owner_resource = owner_resource

    def _event(self, owner: Obj, event_type: str, reason: str, message: str) -> None:
        self._recorder.event(owner, event_type, reason, message, resource=self._owner_resource)

    async def create_pods(
        self,
        namespace: str,
        template: Obj,
        owner: Obj,
        controller_ref: Mapping[str, Any] | None = None,
        *,
        generate_name: str | None = None,
    ) -> dict[str, Any]:
        """Create one pod from ``template`` controlled by ``owner``; returns the pod the API created.

        ``controller_ref`` defaults to :func:`new_controller_ref` of the owner (kind from
        ``owner_resource``, else from the owner object itself).
        ``generate_name`` overrides the ``<owner>-`` prefix (``CreatePodsWithGenerateName``).
        """
        ref = controller_ref if controller_ref is not None else new_controller_ref(owner, self._owner_resource)
        validate_controller_ref(ref)
        pod = pod_from_template(template, owner, ref)
        if generate_name:
            pod["metadata"]["generateName"] = generate_name
        if not pod["metadata"].get("labels"):
            raise ValueError("unable to create pods, no labels")
        try:
            created = await self._client.create(PODS, pod, namespace)
        except ApiError as err:
            if not has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                self._event(owner, "Warning", FAILED_CREATE_POD_REASON, f"Error creating: {err}")
            raise
        name = meta(created).get("name", "")
        _log.debug("controller created pod", owner=meta(owner).get("name"), pod=f"{namespace}/{name}")
        self._event(owner, "Normal", SUCCESSFUL_CREATE_POD_REASON, f"Created pod: {name}")
        return created

    async def delete_pod(self, namespace: str, name: str, owner: Obj, uid: str | None = None) -> None:
        """Delete pod ``namespace/name`` (only if its UID is still ``uid``, when given)."""
        _log.debug("deleting pod", owner=meta(owner).get("name"), pod=f"{namespace}/{name}")
        try:
            await self._client.delete(PODS, name, namespace, uid=uid)
        except NotFound:
            _log.debug("pod has already been deleted", pod=f"{namespace}/{name}")
            raise
        except ApiError as err:
            self._event(owner, "Warning", FAILED_DELETE_POD_REASON, f"Error deleting: {err}")
            raise
        self._event(owner, "Normal", SUCCESSFUL_DELETE_POD_REASON, f"Deleted pod: {name}")

    async def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Strategic-merge patch a pod (``PatchPod``)."""
        return await self._client.patch(PODS, name, patch, namespace, patch_type="strategic")
