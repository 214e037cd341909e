"""``/healthz``, ``/livez`` and ``/readyz`` as kube-apiserver answers them (``k8s.io/apiserver/pkg/server/healthz``).

Guarantees:
- Each endpoint runs its checks in the real server's order: ``ping``, ``log``, ``etcd`` (``/readyz`` adds
  ``etcd-readiness`` and ``informer-sync``), then one ``poststarthook/<name>`` per post-start hook a 1.37
  kube-apiserver registers, ``autoregister-completion`` among them (``/readyz`` ends with ``shutdown``). kube-sim's
  checks always pass: it is serving, its store is in memory, everything it starts is started before it listens.
- Without ``verbose`` the answer is ``ok``; with it, one ``[+]<name> ok`` line per check and ``<endpoint> check
  passed``. ``exclude=<name>`` (repeatable) turns a check's line into ``[+]<name> excluded: ok``; names matching no
  check are reported in a ``warn: some health checks cannot be excluded: no matches for "a","b"`` line (sorted).
- ``/<endpoint>/<check>`` runs one check (``ok``); an unknown check is a 404.
"""

from __future__ import annotations

from collections.abc import Sequence

ENDPOINTS = ("healthz", "livez", "readyz")

_POST_START_HOOKS = (
    "start-apiserver-admission-initializer", "generic-apiserver-start-informers",
    "priority-and-fairness-config-consumer", "priority-and-fairness-filter", "storage-object-count-tracker-hook",
    "start-apiextensions-informers", "start-apiextensions-controllers", "crd-informer-synced",
    "start-system-namespaces-controller", "start-cluster-authentication-info-controller",
    "start-kube-apiserver-identity-lease-controller", "start-kube-apiserver-identity-lease-garbage-collector",
    "start-legacy-token-tracking-controller", "start-service-ip-repair-controllers", "rbac/bootstrap-roles",
    "scheduling/bootstrap-system-priority-classes", "priority-and-fairness-config-producer", "bootstrap-controller",
    "aggregator-reload-proxy-client-cert",
    "start-kube-aggregator-informers", "apiservice-status-local-available-controller",
    "apiservice-status-remote-available-controller", "apiservice-registration-controller",
    "apiservice-discovery-controller", "kube-apiserver-autoregistration",
)
_HOOK_CHECKS = tuple(f"poststarthook/{hook}" for hook in _POST_START_HOOKS)
# autoregister-completion is a check of its own, registered right after the autoregistration hook.
_AFTER_HOOKS = ("autoregister-completion", "poststarthook/apiservice-openapi-controller",
                "poststarthook/apiservice-openapiv3-controller")

CHECKS: dict[str, tuple[str, ...]] = {
    "healthz": ("ping", "log", "etcd", *_HOOK_CHECKS, *_AFTER_HOOKS),
    "livez": ("ping", "log", "etcd", *_HOOK_CHECKS, *_AFTER_HOOKS),
    "readyz": ("ping", "log", "etcd", "etcd-readiness", "informer-sync", *_HOOK_CHECKS, *_AFTER_HOOKS, "shutdown"),
}


def _quoted(names: Sequence[str]) -> str:
    return ",".join('"' + n.replace("\\", "\\\\").replace('"', '\\"') + '"' for n in names)


def answer(path: str, verbose: bool, exclude: Sequence[str]) -> str | None:
    """The text body for a GET of ``path`` (a health endpoint or one of its checks), or None for a 404."""
    parts = path.strip("/").split("/", 1)
    checks = CHECKS.get(parts[0])
    if checks is None:
        return None
    if len(parts) == 2:  # one check by name
        return "ok" if parts[1] in checks else None
    if not verbose:
        return "ok"
    lines = [f"[+]{name} excluded: ok" if name in exclude else f"[+]{name} ok" for name in checks]
    unknown = sorted(set(exclude) - set(checks))
    if unknown:
        lines.append(f"warn: some health checks cannot be excluded: no matches for {_quoted(unknown)}")
    return "\n".join(lines) + f"\n{parts[0]} check passed\n"
