"""The table of kube-controller-manager's controllers and the ``--controllers`` selection over it.

Guarantees:
- :data:`KNOWN_CONTROLLERS` lists every controller kube-controller-manager v1.34 knows (the ``--controllers``
  help text of the kubernetes.io reference, ``cmd/kube-controller-manager/names/controller_names.go``), each
  with the aliases upstream accepts and whether ``*`` enables it. Names are IDs: never renamed here.
- ``--controllers`` is read exactly as upstream reads it (``k8s.io/controller-manager``'s
  ``options/generic.go`` ``ApplyTo``/``Validate`` and ``app/helper.go`` ``IsControllerEnabled``): aliases are
  rewritten to canonical names keeping a leading ``-``; the first exact ``name`` enables, the first ``-name``
  disables, otherwise a controller runs iff ``*`` is present and it is not disabled by default; any unknown
  name (``-unknown`` included) is the startup error ``"X" is not in the list of known controllers``.
- Controllers this project implements are the ``Controller`` classes in ``controller_manager.controllers.ALL``,
  found lazily: an empty or missing list just means every known controller is "not implemented". A class
  whose name upstream does not know is added to the table (an extension), with its own alias and default.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller_manager.runtime.controller import Controller


@dataclass(frozen=True, slots=True)
class ControllerInfo:
    """One row of the table: a controller as ``--controllers`` names it."""

    name: str
    aliases: tuple[str, ...] = ()
    enabled_by_default: bool = True
    implementation: type[Controller] | None = None

    @property
    def implemented(self) -> bool:
        return self.implementation is not None


def _c(name: str, *aliases: str, on: bool = True) -> ControllerInfo:
    return ControllerInfo(name, tuple(aliases), on)


# Order is start order: upstream starts serviceaccount-token-controller first (other controllers' clients
# need its tokens), then the rest as NewControllerDescriptors registers them.
KNOWN_CONTROLLERS: tuple[ControllerInfo, ...] = (
    _c("serviceaccount-token-controller", "serviceaccount-token"),
    _c("endpoints-controller", "endpoint"),
    _c("endpointslice-controller", "endpointslice"),
    _c("endpointslice-mirroring-controller", "endpointslicemirroring"),
    _c("replicationcontroller-controller", "replicationcontroller"),
    _c("pod-garbage-collector-controller", "podgc"),
    _c("resourcequota-controller", "resourcequota"),
    _c("namespace-controller", "namespace"),
    _c("serviceaccount-controller", "serviceaccount"),
    _c("garbage-collector-controller", "garbagecollector"),
    _c("daemonset-controller", "daemonset"),
    _c("job-controller", "job"),
    _c("deployment-controller", "deployment"),
    _c("replicaset-controller", "replicaset"),
    _c("horizontal-pod-autoscaler-controller", "horizontalpodautoscaling"),
    _c("disruption-controller", "disruption"),
    _c("statefulset-controller", "statefulset"),
    _c("cronjob-controller", "cronjob"),
    _c("certificatesigningrequest-signing-controller", "csrsigning"),
    _c("certificatesigningrequest-approving-controller", "csrapproving"),
    _c("certificatesigningrequest-cleaner-controller", "csrcleaner"),
    _c("podcertificaterequest-cleaner-controller"),
    _c("ttl-controller", "ttl"),
    _c("bootstrap-signer-controller", "bootstrapsigner", on=False),
    _c("token-cleaner-controller", "tokencleaner", on=False),
    _c("node-ipam-controller", "nodeipam"),
    _c("node-lifecycle-controller", "nodelifecycle"),
    _c("service-lb-controller", "service"),
    _c("node-route-controller", "route"),
    _c("cloud-node-lifecycle-controller", "cloud-node-lifecycle"),
    _c("persistentvolume-binder-controller", "persistentvolume-binder"),
    _c("persistentvolume-attach-detach-controller", "attachdetach"),
    _c("persistentvolume-expander-controller", "persistentvolume-expander"),
    _c("clusterrole-aggregation-controller", "clusterrole-aggregation"),
    _c("persistentvolumeclaim-protection-controller", "pvc-protection"),
    _c("persistentvolume-protection-controller", "pv-protection"),
    _c("volumeattributesclass-protection-controller"),
    _c("ttl-after-finished-controller", "ttl-after-finished"),
    _c("root-ca-certificate-publisher-controller", "root-ca-cert-publisher"),
    _c("kube-apiserver-serving-clustertrustbundle-publisher-controller"),
    _c("ephemeral-volume-controller", "ephemeral-volume"),
    _c("storageversion-garbage-collector-controller", "storage-version-gc"),
    _c("resourceclaim-controller", "resource-claim-controller"),
    _c("device-taint-eviction-controller"),
    _c("legacy-serviceaccount-token-cleaner-controller", "legacy-service-account-token-cleaner"),
    _c("validatingadmissionpolicy-status-controller"),
    _c("taint-eviction-controller"),
    _c("service-cidr-controller"),
    _c("storage-version-migrator-controller"),
    _c("selinux-warning-controller", on=False),
)


class UnknownControllersError(ValueError):
    """``--controllers`` named something no controller answers to. ``str()`` is one line, as upstream prints."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = tuple(errors)
        super().__init__(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


# --- upstream's three functions, over plain names (so upstream's test tables port as they are) -----------

def canonicalize(controllers: Iterable[str], aliases: Mapping[str, str]) -> list[str]:
    """``GenericControllerManagerConfigurationOptions.ApplyTo``: aliases -> canonical names, keeping ``-``."""
    out = []
    for given in controllers:
        disabled = given.startswith("-")
        bare = given[1:] if disabled else given
        name = aliases.get(bare, bare)
        out.append(f"-{name}" if disabled else name)
    return out


def validate_controllers(
    controllers: Iterable[str], all_controllers: Iterable[str], aliases: Mapping[str, str] | None = None
) -> list[str]:
    """``GenericControllerManagerConfigurationOptions.Validate``'s controller check: one message per bad name."""
    known = set(all_controllers)
    aliases = aliases or {}
    errors = []
    for given in controllers:
        if given == "*":
            continue
        bare = given[1:] if given.startswith("-") else given
        if aliases.get(bare, bare) not in known:
            errors.append(f'"{bare}" is not in the list of known controllers')
    return errors


def is_controller_enabled(name: str, disabled_by_default: Iterable[str], controllers: Sequence[str]) -> bool:
    """``IsControllerEnabled``: first explicit mention wins, else ``*`` and not disabled by default."""
    has_star = False
    for entry in controllers:
        if entry == name:
            return True
        if entry == f"-{name}":
            return False
        if entry == "*":
            has_star = True
    return has_star and name not in set(disabled_by_default)


# --- the registry ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Selection:
    """What ``--controllers`` picked, in start order."""

    enabled: tuple[ControllerInfo, ...]

    @property
    def runnable(self) -> tuple[ControllerInfo, ...]:
        return tuple(c for c in self.enabled if c.implemented)

    @property
    def not_implemented(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.enabled if not c.implemented)


class Registry:
    """The known controllers with their implementations attached."""

    def __init__(self, controllers: Iterable[ControllerInfo]) -> None:
        self._controllers: dict[str, ControllerInfo] = {}
        self._aliases: dict[str, str] = {}
        for info in controllers:
            if info.name in self._controllers:
                raise ValueError(f"controller name {info.name!r} was registered twice")
            for alias in info.aliases:
                if alias in self._aliases:
                    raise ValueError(f"controller {info.name!r} has a duplicate alias {alias!r}")
                self._aliases[alias] = info.name
            self._controllers[info.name] = info
        for alias in self._aliases:
            if alias in self._controllers:
                raise ValueError(f"alias {alias!r} conflicts with a controller name")

    @classmethod
    def with_implementations(cls, implementations: Iterable[type[Controller]]) -> Registry:
        """The upstream table, each row joined with the class implementing it (by canonical name)."""
        by_name = {info.name: info for info in KNOWN_CONTROLLERS}
        extensions: list[ControllerInfo] = []
        for impl in implementations:
            name: str = impl.name
            known = by_name.get(name)
            if known is not None:
                by_name[name] = ControllerInfo(known.name, known.aliases, known.enabled_by_default, impl)
            else:
                alias = getattr(impl, "alias", "") or ""
                extensions.append(ControllerInfo(name, (alias,) if alias and alias != name else (),
                                                 bool(getattr(impl, "enabled_by_default", True)), impl))
        return cls([*by_name.values(), *extensions])

    def __iter__(self) -> Any:
        return iter(self._controllers.values())

    def __len__(self) -> int:
        return len(self._controllers)

    def get(self, name: str) -> ControllerInfo | None:
        return self._controllers.get(self._aliases.get(name, name))

    def names(self) -> list[str]:
        """Every canonical name, sorted (as upstream's ``KnownControllers``)."""
        return sorted(self._controllers)

    def aliases(self) -> dict[str, str]:
        """alias -> canonical name (upstream's ``ControllerAliases``)."""
        return dict(self._aliases)

    def disabled_by_default(self) -> list[str]:
        return sorted(c.name for c in self._controllers.values() if not c.enabled_by_default)

    def select(self, controllers: Sequence[str]) -> Selection:
        """Validate ``--controllers`` and resolve it; raise :class:`UnknownControllersError` on unknown names."""
        errors = validate_controllers(controllers, self._controllers, self._aliases)
        if errors:
            raise UnknownControllersError(errors)
        canonical = canonicalize(controllers, self._aliases)
        off = self.disabled_by_default()
        return Selection(tuple(c for c in self._controllers.values() if is_controller_enabled(c.name, off, canonical)))


def implemented_controllers() -> list[type[Controller]]:
    """``controller_manager.controllers.ALL``, or ``[]`` while that package does not provide it yet."""
    try:
        module = importlib.import_module("controller_manager.controllers")
    except ModuleNotFoundError as exc:
        if exc.name != "controller_manager.controllers":
            raise  # a controller module is broken: fail loudly, never run silently without it
        return []
    found = getattr(module, "ALL", None)
    return list(found) if isinstance(found, (list, tuple)) else []


def default_registry() -> Registry:
    return Registry.with_implementations(implemented_controllers())
