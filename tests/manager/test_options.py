"""Flags: names, defaults, Go durations and booleans, one-line errors."""

from __future__ import annotations

import re

import pytest

from controller_manager.manager.options import (
    DEFAULT_LEASE_NAME,
    Options,
    OptionsError,
    build_parser,
    parse_duration,
    parse_options,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0", 0.0, id="zero-needs-no-unit"),
        pytest.param("15s", 15.0, id="seconds"),
        pytest.param("1m", 60.0, id="minutes"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1h30m", 5400.0, id="compound"),
        pytest.param("1h30m15s", 5415.0, id="three-units"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param(".5s", 0.5, id="leading-dot"),
        pytest.param("1.s", 1.0, id="trailing-dot"),
        pytest.param("12h", 43200.0, id="hours"),
        pytest.param("100us", 1e-4, id="microseconds"),
        pytest.param("100\u00b5s", 1e-4, id="micro-sign"),
        pytest.param("3ns", 3e-9, id="nanoseconds"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("+2s", 2.0, id="explicit-plus"),
        pytest.param("0s", 0.0, id="zero-seconds"),
    ],
)
def test_parse_duration_accepts_go_syntax(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", 'time: invalid duration ""', id="empty"),
        pytest.param("abc", 'time: invalid duration "abc"', id="no-number"),
        pytest.param("1", 'time: missing unit in duration "1"', id="missing-unit"),
        pytest.param("1x", 'time: unknown unit "x" in duration "1x"', id="unknown-unit"),
        pytest.param("1d", 'time: unknown unit "d" in duration "1d"', id="no-days"),
        pytest.param(".s", 'time: invalid duration ".s"', id="dot-only"),
        pytest.param("-", 'time: invalid duration "-"', id="sign-only"),
        pytest.param("1s2", 'time: missing unit in duration "1s2"', id="dangling-number"),
    ],
)
def test_parse_duration_rejects_like_go(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.").replace("(", r"\(") + "$"):
        parse_duration(text)


def test_defaults_match_kube_controller_manager() -> None:
    o = parse_options([])
    assert o == Options()
    assert o.controllers == ("*",)
    assert o.leader_elect is True
    assert (o.leader_elect_lease_duration, o.leader_elect_renew_deadline, o.leader_elect_retry_period) == (15, 10, 2)
    assert o.leader_elect_resource_lock == "leases"
    assert o.leader_elect_resource_name == DEFAULT_LEASE_NAME != "kube-controller-manager"
    assert o.leader_elect_resource_namespace == "kube-system"
    assert (o.secure_port, o.bind_address) == (10257, "0.0.0.0")
    assert o.authorization_always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert (o.kube_api_qps, o.kube_api_burst) == (20.0, 30)
    assert o.min_resync_period == 12 * 3600
    syncs = {
        "concurrent-deployment-syncs": 5, "concurrent-replicaset-syncs": 5, "concurrent-daemonset-syncs": 2,
        "concurrent-job-syncs": 5, "concurrent-cron-job-syncs": 5, "concurrent-statefulset-syncs": 5,
        "concurrent-service-endpoint-syncs": 5, "max-endpoints-per-slice": 100, "concurrent-gc-syncs": 20,
        "concurrent-namespace-syncs": 10, "concurrent-ttl-after-finished-syncs": 5,
        "concurrent-ephemeralvolume-syncs": 5,
        "node-monitor-period": 5.0, "node-monitor-grace-period": 50.0, "node-startup-grace-period": 60.0,
        "node-eviction-rate": 0.1, "secondary-node-eviction-rate": 0.01, "large-cluster-size-threshold": 50,
        "unhealthy-zone-threshold": 0.55, "terminated-pod-gc-threshold": 12500,
        "mirroring-concurrent-service-endpoint-syncs": 5, "mirroring-max-endpoints-per-subset": 1000,
        "mirroring-endpointslice-updates-batch-period": 0.0,
    }
    assert {flag: o.value(flag) for flag in syncs} == syncs
    assert (o.log_format, o.v) == ("json", 0)


def test_help_lists_every_flag_with_its_default() -> None:
    names = ["deployment-controller", "token-cleaner-controller"]
    text = build_parser(names, ["token-cleaner-controller"]).format_help()
    for flag, default in [
        ("--kubeconfig", "''"), ("--master", "''"), ("--controllers", "*"), ("--leader-elect", "true"),
        ("--leader-elect-lease-duration", "15s"), ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"), ("--leader-elect-resource-lock", "leases"),
        ("--leader-elect-resource-name", DEFAULT_LEASE_NAME), ("--leader-elect-resource-namespace", "kube-system"),
        ("--secure-port", "10257"), ("--bind-address", "0.0.0.0"), ("--tls-cert-file", "''"),
        ("--tls-private-key-file", "''"), ("--authorization-always-allow-paths", "/healthz,/readyz,/livez"),
        ("--kube-api-qps", "20"), ("--kube-api-burst", "30"), ("--min-resync-period", "12h"),
        ("--concurrent-deployment-syncs", "5"), ("--concurrent-replicaset-syncs", "5"),
        ("--concurrent-daemonset-syncs", "2"), ("--concurrent-job-syncs", "5"), ("--concurrent-cron-job-syncs", "5"),
        ("--concurrent-statefulset-syncs", "5"), ("--concurrent-service-endpoint-syncs", "5"),
        ("--concurrent-gc-syncs", "20"), ("--concurrent-namespace-syncs", "10"),
        ("--concurrent-ttl-after-finished-syncs", "5"), ("--max-endpoints-per-slice", "100"),
        ("--concurrent-ephemeralvolume-syncs", "5"),
        ("--node-monitor-period", "5s"), ("--node-monitor-grace-period", "50s"),
        ("--node-startup-grace-period", "1m"), ("--node-eviction-rate", "0.1"),
        ("--secondary-node-eviction-rate", "0.01"), ("--large-cluster-size-threshold", "50"),
        ("--unhealthy-zone-threshold", "0.55"), ("--terminated-pod-gc-threshold", "12500"),
        ("--mirroring-concurrent-service-endpoint-syncs", "5"), ("--mirroring-max-endpoints-per-subset", "1000"),
        ("--mirroring-endpointslice-updates-batch-period", "0s"),
        ("--log-format", "json"), ("--v", "0"),
    ]:
        match = re.search(rf"^  (?:-v \S+, )?{flag} ", text, re.MULTILINE)
        assert match is not None, flag
        start = match.start()
        flat = " ".join(text[start:].split())  # help wraps lines anywhere
        section = flat[:flat.index("(default: ") + len("(default: ") + len(default) + 1]
        assert section.endswith(f"(default: {default})"), (flag, section)
    # Names stay whole in the help text, and the disabled-by-default list is there.
    assert "Disabled-by-default controllers: token-cleaner-controller" in " ".join(text.split())


@pytest.mark.parametrize(
    ("argv", "attr", "expected"),
    [
        pytest.param(["--leader-elect=false"], "leader_elect", False, id="bool-false"),
        pytest.param(["--leader-elect=0"], "leader_elect", False, id="bool-zero"),
        pytest.param(["--leader-elect"], "leader_elect", True, id="bool-bare"),
        pytest.param(["--leader-elect=false", "--leader-elect=True"], "leader_elect", True, id="bool-last-wins"),
        pytest.param(["--controllers=*,-job,bootstrapsigner"], "controllers", ("*", "-job", "bootstrapsigner"),
                     id="slice"),
        pytest.param(["--controllers="], "controllers", (), id="empty-slice"),
        pytest.param(["--leader-elect-lease-duration", "1m"], "leader_elect_lease_duration", 60.0, id="duration"),
        pytest.param(["--kube-api-qps=50.5"], "kube_api_qps", 50.5, id="float"),
        pytest.param(["-v", "4"], "v", 4, id="short-v"),
        pytest.param(["-v=5"], "v", 5, id="short-v-equals"),
        pytest.param(["--v=2"], "v", 2, id="long-v"),
        pytest.param(["--log-format=text"], "log_format", "text", id="text-logs"),
        pytest.param(["--secure-port=0"], "secure_port", 0, id="serving-off"),
        pytest.param(["--authorization-always-allow-paths=/healthz,/metrics"], "authorization_always_allow_paths",
                     ("/healthz", "/metrics"), id="allow-paths"),
    ],
)
def test_flag_values(argv: list[str], attr: str, expected: object) -> None:
    assert getattr(parse_options(argv), attr) == expected


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        pytest.param(["--leader-elect-lease-duration=abc"], 'time: invalid duration "abc"', id="bad-duration"),
        pytest.param(["--leader-elect-retry-period=2"], 'missing unit in duration "2"', id="unitless-duration"),
        pytest.param(["--leader-elect=maybe"], 'parsing "maybe": invalid syntax', id="bad-bool"),
        pytest.param(["--concurrent-job-syncs=x"], 'parsing "x": invalid syntax', id="bad-int"),
        pytest.param(["--no-such-flag"], "unrecognized arguments: --no-such-flag", id="unknown-flag"),
        pytest.param(["--leader-elect-res=x"], "unrecognized arguments", id="no-abbreviations"),
        pytest.param(["--log-format=xml"], "invalid choice: 'xml'", id="bad-log-format"),
        pytest.param(["--leader-elect-resource-lock=endpoints"], 'resourceLock value must be "leases"',
                     id="only-leases"),
        pytest.param(["--leader-elect-lease-duration=5s"], "leaseDuration must be greater than renewDeadline",
                     id="lease-shorter-than-renew"),
        pytest.param(["--secure-port=70000"], "must be between 0 and 65535", id="port-range"),
        pytest.param(["--tls-cert-file=/x.crt"], "must be given together", id="cert-without-key"),
        pytest.param(["--concurrent-gc-syncs=-1"], "--concurrent-gc-syncs must not be negative", id="negative-workers"),
        # EndpointSliceMirroringControllerOptions.Validate
        pytest.param(["--mirroring-concurrent-service-endpoint-syncs=51"],
                     "mirroring-concurrent-service-endpoint-syncs must not be more than 50, but got 51",
                     id="mirroring-workers-max"),
        pytest.param(["--mirroring-max-endpoints-per-subset=0"],
                     "mirroring-max-endpoints-per-subset must not be less than 1, but got 0",
                     id="mirroring-subset-min"),
        pytest.param(["--mirroring-max-endpoints-per-subset=1001"],
                     "mirroring-max-endpoints-per-subset must not be more than 1000, but got 1001",
                     id="mirroring-subset-max"),
    ],
)
def test_bad_values_raise_one_line(argv: list[str], fragment: str) -> None:
    with pytest.raises(OptionsError) as info:
        parse_options(argv)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


def test_lock_is_not_checked_without_leader_election() -> None:
    assert parse_options(["--leader-elect=false", "--leader-elect-resource-lock=endpoints"]).leader_elect is False


def test_value_rejects_unknown_flag() -> None:
    with pytest.raises(KeyError):
        Options().value("concurrent-nothing-syncs")


def test_attach_detach_flags_default_and_validate_as_upstream() -> None:
    options = parse_options([])
    assert options.attach_detach_reconcile_sync_period == 60.0
    assert options.disable_attach_detach_reconcile_sync is False
    assert options.disable_force_detach_on_timeout is False
    options = parse_options(["--attach-detach-reconcile-sync-period=2m", "--disable-force-detach-on-timeout"])
    assert (options.attach_detach_reconcile_sync_period, options.disable_force_detach_on_timeout) == (120.0, True)
    with pytest.raises(OptionsError) as info:
        parse_options(["--attach-detach-reconcile-sync-period=500ms"])
    assert str(info.value) == ("duration time must be greater than one second as set via command line option "
                               "reconcile-sync-loop-period")


def test_feature_gates_parse_and_merge_as_component_base() -> None:
    assert parse_options([]).feature_enabled("WatchListClient")  # on by default, as client-go 1.35+
    off = parse_options(["--feature-gates=WatchListClient=false"])
    assert off.feature_gates == (("WatchListClient", False),)
    assert not off.feature_enabled("WatchListClient")
    # Several flags merge, the later pair winning; blanks and empty entries are ignored; Go's bool forms.
    merged = parse_options(["--feature-gates", "WatchListClient=F,", "--feature-gates", " WatchListClient = 1 "])
    assert merged.feature_enabled("WatchListClient")
    help_text = build_parser().format_help()
    assert "WatchListClient=true|false (BETA - default=true)" in " ".join(help_text.split())


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("WatchListClient", "missing bool value for WatchListClient"),
        ("WatchListClient=maybe",
         'invalid value of WatchListClient=maybe, err: strconv.ParseBool: parsing "maybe": invalid syntax'),
        ("NoSuchGate=true", "unrecognized feature gate: NoSuchGate"),
        ("A=true,B=false", "[unrecognized feature gate: A, unrecognized feature gate: B]"),
    ],
)
def test_feature_gates_refused_with_upstream_words(value: str, message: str) -> None:
    with pytest.raises(OptionsError) as err:
        parse_options([f"--feature-gates={value}"])
    assert str(err.value) == f"argument --feature-gates: {message}"
