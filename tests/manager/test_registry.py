"""The controller table and ``--controllers`` parsing, with upstream's test tables ported."""

from __future__ import annotations

import re
from typing import ClassVar

import pytest

from controller_manager.manager.registry import (
    KNOWN_CONTROLLERS,
    ControllerInfo,
    Registry,
    UnknownControllersError,
    canonicalize,
    default_registry,
    implemented_controllers,
    is_controller_enabled,
    validate_controllers,
)

# k8s.io/controller-manager/app/helper_test.go TestIsControllerEnabled
_DISABLED = ["delta", "echo"]


@pytest.mark.parametrize(
    ("name", "controllers", "expected"),
    [
        pytest.param("bravo", ["alpha", "bravo", "-charlie"], True, id="on by name"),
        pytest.param("charlie", ["alpha", "bravo", "-charlie"], False, id="off by name"),
        pytest.param("alpha", ["*"], True, id="on by default"),
        pytest.param("delta", ["*"], False, id="off by default"),
        pytest.param("alpha", ["*", "-charlie"], True, id="on by star, not off by name"),
        pytest.param("charlie", ["*", "-charlie"], False, id="off by name with star"),
        pytest.param("foxtrot", ["alpha", "bravo", "-charlie"], False, id="off by default implicit, no star"),
        # first explicit mention wins, whatever follows
        pytest.param("alpha", ["-alpha", "alpha"], False, id="first mention wins: off"),
        pytest.param("alpha", ["alpha", "-alpha"], True, id="first mention wins: on"),
        pytest.param("delta", ["*", "delta"], True, id="disabled by default, named"),
        pytest.param("alpha", [], False, id="empty list runs nothing"),
    ],
)
def test_is_controller_enabled(name: str, controllers: list[str], expected: bool) -> None:
    assert is_controller_enabled(name, _DISABLED, controllers) is expected


# k8s.io/controller-manager/options/generic_test.go
_ALL = ["red-controller", "green-controller", "blue-controller"]
_ALIASES = {"crimson-controller": "red-controller", "pink-controller": "red-controller",
            "ultramarine-controller": "blue-controller"}


@pytest.mark.parametrize(
    ("all_controllers", "aliases", "controllers", "error"),
    [
        pytest.param([], {}, ["*"], None, id="no controllers defined"),
        pytest.param(_ALL, _ALIASES, [], None, id="recognizes empty controllers"),
        pytest.param(_ALL, {}, ["blue-controller"], None, id="recognizes controllers without any aliases"),
        pytest.param(_ALL, _ALIASES, ["*", "-red-controller", "blue-controller"], None,
                     id="recognizes valid controllers"),
        pytest.param(_ALL, _ALIASES, ["green-controller"], None, id="recognizes disabled controller"),
        pytest.param(_ALL, _ALIASES, ["ultramarine-controller", "-pink-controller"], None,
                     id="recognized aliased controller"),
        pytest.param([], {}, ["red-controller"], '"red-controller" is not in the list of known controllers',
                     id="does not recognize controller"),
        pytest.param(_ALL, _ALIASES, ["crimson-controller", "grey-controller"],
                     '"grey-controller" is not in the list of known controllers',
                     id="does not recognize controller with aliases"),
        pytest.param(_ALL, _ALIASES, ["-grey-controller"], '"grey-controller" is not in the list of known controllers',
                     id="exclude unknown controller"),
    ],
)
def test_validate_controllers(
    all_controllers: list[str], aliases: dict[str, str], controllers: list[str], error: str | None
) -> None:
    errors = validate_controllers(controllers, all_controllers, aliases)
    assert errors == ([error] if error else [])


@pytest.mark.parametrize(
    ("aliases", "controllers", "expected"),
    [
        pytest.param({}, ["*"], ["*"], id="no controllers defined"),
        pytest.param({}, ["-blue-controller"], ["-blue-controller"], id="empty aliases"),
        pytest.param(_ALIASES, ["*", "green-controller", "-red-controller", "blue-controller"],
                     ["*", "green-controller", "-red-controller", "blue-controller"], id="applies valid controllers"),
        pytest.param(_ALIASES, ["green-controller", "-crimson-controller", "ultramarine-controller",
                                "-pink-controller"],
                     ["green-controller", "-red-controller", "blue-controller", "-red-controller"],
                     id="resolves aliases"),
    ],
)
def test_canonicalize(aliases: dict[str, str], controllers: list[str], expected: list[str]) -> None:
    assert canonicalize(controllers, aliases) == expected


# The real table: every name and alias REFERENCE.md lists, with its default.
_REFERENCE = [
    ("deployment-controller", "deployment", True),
    ("replicaset-controller", "replicaset", True),
    ("daemonset-controller", "daemonset", True),
    ("job-controller", "job", True),
    ("cronjob-controller", "cronjob", True),
    ("statefulset-controller", "statefulset", True),
    ("replicationcontroller-controller", "replicationcontroller", True),
    ("ttl-after-finished-controller", "ttl-after-finished", True),
    ("pod-garbage-collector-controller", "podgc", True),
    ("garbage-collector-controller", "garbagecollector", True),
    ("namespace-controller", "namespace", True),
    ("node-lifecycle-controller", "nodelifecycle", True),
    ("taint-eviction-controller", None, True),
    ("endpoints-controller", "endpoint", True),
    ("endpointslice-controller", "endpointslice", True),
    ("endpointslice-mirroring-controller", "endpointslicemirroring", True),
    ("disruption-controller", "disruption", True),
    ("resourcequota-controller", "resourcequota", True),
    ("serviceaccount-controller", "serviceaccount", True),
    ("serviceaccount-token-controller", "serviceaccount-token", True),
    ("horizontal-pod-autoscaler-controller", "horizontalpodautoscaling", True),
    ("bootstrap-signer-controller", "bootstrapsigner", False),
    ("token-cleaner-controller", "tokencleaner", False),
]


@pytest.mark.parametrize(("name", "alias", "on"), [pytest.param(*row, id=row[0]) for row in _REFERENCE])
def test_reference_controllers_are_known(name: str, alias: str | None, on: bool) -> None:
    registry = Registry(KNOWN_CONTROLLERS)
    info = registry.get(name)
    assert info is not None
    assert info.name == name
    assert info.enabled_by_default is on
    if alias is None:
        assert info.aliases == ()
    else:
        assert alias in info.aliases
        assert registry.get(alias) is info
        assert registry.aliases()[alias] == name


def test_table_matches_upstream_shape() -> None:
    registry = Registry(KNOWN_CONTROLLERS)
    assert len(registry) == 50  # kube-controller-manager v1.34's --controllers help lists 50
    # app/controllermanager_test.go TestControllerNamesConsistency
    for name in registry.names():
        assert re.fullmatch(r"[a-z]([-a-z]*[a-z])?", name), name
        assert name.endswith("-controller"), name
    assert registry.disabled_by_default() == [
        "bootstrap-signer-controller", "selinux-warning-controller", "token-cleaner-controller"]
    assert KNOWN_CONTROLLERS[0].name == "serviceaccount-token-controller"  # started first upstream


def test_star_enables_everything_on_by_default() -> None:
    selection = Registry(KNOWN_CONTROLLERS).select(["*"])
    names = {c.name for c in selection.enabled}
    assert "deployment-controller" in names
    assert "bootstrap-signer-controller" not in names
    assert "token-cleaner-controller" not in names
    assert len(names) == 47


@pytest.mark.parametrize(
    ("controllers", "on", "off"),
    [
        pytest.param(["*", "-job"], {"deployment-controller"}, {"job-controller"}, id="alias disables"),
        pytest.param(["*", "-job-controller"], set(), {"job-controller"}, id="canonical disables"),
        pytest.param(["*", "bootstrapsigner", "tokencleaner"], {"bootstrap-signer-controller",
                                                                "token-cleaner-controller"}, set(),
                     id="named enables disabled-by-default"),
        pytest.param(["deployment", "replicaset"], {"deployment-controller", "replicaset-controller"},
                     {"job-controller"}, id="no star: only named"),
        pytest.param(["-deployment", "deployment"], set(), {"deployment-controller"}, id="first mention wins"),
    ],
)
def test_select(controllers: list[str], on: set[str], off: set[str]) -> None:
    enabled = {c.name for c in Registry(KNOWN_CONTROLLERS).select(controllers).enabled}
    assert on <= enabled
    assert not off & enabled


@pytest.mark.parametrize(
    ("controllers", "message"),
    [
        pytest.param(["*", "nosuch"], '"nosuch" is not in the list of known controllers', id="unknown"),
        pytest.param(["*", "-nosuch"], '"nosuch" is not in the list of known controllers', id="minus-unknown"),
        pytest.param(["a", "b"], '["a" is not in the list of known controllers, '
                                 '"b" is not in the list of known controllers]', id="several"),
    ],
)
def test_select_rejects_unknown(controllers: list[str], message: str) -> None:
    with pytest.raises(UnknownControllersError) as info:
        Registry(KNOWN_CONTROLLERS).select(controllers)
    assert str(info.value) == message


class _FakeDeployment:
    name: ClassVar[str] = "deployment-controller"
    alias: ClassVar[str] = "deployment"
    enabled_by_default: ClassVar[bool] = True


class _FakeExtension:
    name: ClassVar[str] = "example-controller"
    alias: ClassVar[str] = "example"
    enabled_by_default: ClassVar[bool] = False


def test_implementations_join_the_table() -> None:
    registry = Registry.with_implementations([_FakeDeployment, _FakeExtension])  # type: ignore[list-item]
    info = registry.get("deployment")
    assert info is not None
    assert info.implementation is _FakeDeployment
    selection = registry.select(["*", "example"])
    assert [c.name for c in selection.runnable] == ["deployment-controller", "example-controller"]
    assert "job-controller" in selection.not_implemented
    assert "deployment-controller" not in selection.not_implemented
    assert registry.get("example") is not None
    assert "example-controller" not in {c.name for c in registry.select(["*"]).enabled}


def test_registry_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        Registry([ControllerInfo("a-controller"), ControllerInfo("a-controller")])
    with pytest.raises(ValueError, match="duplicate alias"):
        Registry([ControllerInfo("a-controller", ("x",)), ControllerInfo("b-controller", ("x",))])
    with pytest.raises(ValueError, match="conflicts with a controller name"):
        Registry([ControllerInfo("a-controller", ("b-controller",)), ControllerInfo("b-controller")])


def test_default_registry_uses_controllers_all() -> None:
    from controller_manager import controllers

    assert implemented_controllers() == list(controllers.ALL)
    assert {c.name for c in default_registry()} >= {c.name for c in KNOWN_CONTROLLERS}
