"""The ServiceAccount admission plugin on pod creation (plugin/pkg/admission/serviceaccount), opt-in.

Why opt-in (``ApiServerOptions.service_account_admission``): upstream refuses a pod whose ServiceAccount does
not exist, and ``default`` ServiceAccounts come from kube-controller-manager's serviceaccount controller, which
kube-sim alone does not run; with the daemon running it, turning this on behaves as a real cluster does.

Guarantees (pods without the ``kubernetes.io/config.mirror`` annotation):
- ``spec.serviceAccountName`` (defaulted to ``default``) must name an existing ServiceAccount, else 403
  ``error looking up service account <ns>/<name>: serviceaccount "<name>" not found``.
- Unless ``automountServiceAccountToken`` is false on the pod (or, unset there, on the ServiceAccount), a
  projected volume ``kube-api-access-<5 random>`` (token expiring in 3607 s, ``kube-root-ca.crt``'s ``ca.crt``,
  the namespace) is added and mounted read-only at ``/var/run/secrets/kubernetes.io/serviceaccount`` in every
  init and regular container that mounts nothing there yet.
- A pod with no ``imagePullSecrets`` gets its ServiceAccount's.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import SERVICEACCOUNTS
from controller_manager.sim.apiserver import errors

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TOKEN_EXPIRATION = 3607  # the bound-token "warn only" expiration kube-apiserver projects into pods
_DEFAULT_MODE = 0o644


def token_volume(name: str) -> Obj:
    return {"name": name, "projected": {"defaultMode": _DEFAULT_MODE, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


def admit(api: ApiServer, pod: Obj, namespace: str, suffix: Callable[[], str]) -> Obj:
    """The pod as the plugin leaves it (``pod`` is modified in place and returned)."""
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return pod
    spec = pod.setdefault("spec", {})
    name = str(spec.get("serviceAccountName") or "default")
    sa = api.stored_object(SERVICEACCOUNTS, namespace, name)
    if sa is None:
        raise errors.forbidden("", "pods", str(meta.get("name") or ""),
                               f'error looking up service account {namespace}/{name}: serviceaccount "{name}" '
                               "not found")
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = sa.get("automountServiceAccountToken")
    if automount is not False:
        _mount_token(spec, suffix)
    if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [dict(s) for s in sa["imagePullSecrets"]]
    return pod


def _mount_token(spec: Obj, suffix: Callable[[], str]) -> None:
    containers = [c for c in chain(spec.get("initContainers") or (), spec.get("containers") or ())
                  if isinstance(c, dict)]
    lacking = [c for c in containers if not any(isinstance(m, dict) and m.get("mountPath") == MOUNT_PATH
                                                for m in c.get("volumeMounts") or ())]
    if not lacking:
        return
    taken = {v.get("name") for v in spec.get("volumes") or () if isinstance(v, dict)}
    volume = VOLUME_PREFIX + suffix()
    while volume in taken:
        volume = VOLUME_PREFIX + suffix()
    for c in lacking:
        c["volumeMounts"] = [*(c.get("volumeMounts") or ()), {"name": volume, "readOnly": True,
                                                             "mountPath": MOUNT_PATH}]
    spec["volumes"] = [*(spec.get("volumes") or ()), token_volume(volume)]
