"""A kubelet's Lease renewal stored in place is the generic update's result, byte for byte, with the same watch
event; where that is not certain it writes nothing and says so."""

from __future__ import annotations

from typing import Any

from controller_manager.api.meta import format_micro_time
from controller_manager.api.resources import LEASES
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.apiserver.renewal import renew_in_place

NS = "kube-node-lease"


def lease(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": "u-1"}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}}


def generic_renewal(api: ApiServer, name: str, renew_time: str) -> None:
    current = api.get(LEASES, NS, name)
    spec = {**current["spec"], "holderIdentity": name, "renewTime": renew_time, "leaseDurationSeconds": 40}
    api.update(LEASES, {**current, "spec": spec}, field_manager="kubelet")


def test_renewal_in_place_stores_what_the_update_stores() -> None:
    clocks = FakeClock(), FakeClock()
    generic, fast = ApiServer(clocks[0]), ApiServer(clocks[1])
    for api in (generic, fast):
        api.create(LEASES, lease("node-1"), NS, field_manager="kubelet")
    watches = [api.watch(LEASES, NS, resource_version=str(api.current_rv())) for api in (generic, fast)]
    for step in range(3):
        for clock in clocks:
            clock.advance(10.5)
        renew_time = format_micro_time(clocks[0].now())
        generic_renewal(generic, "node-1", renew_time)
        stored = fast.get_stored(LEASES, NS, "node-1")
        assert renew_in_place(fast, stored, holder="node-1", duration=40, renew_time=renew_time, manager="kubelet",
                              now=clocks[1].now())
        a, b = generic.get_stored(LEASES, NS, "node-1"), fast.get_stored(LEASES, NS, "node-1")
        # The uid and the resourceVersions come from each server's own counters: compare everything else.
        same = {"uid": "x", "resourceVersion": "x"}
        assert {**a.obj, "metadata": {**a.obj["metadata"], **same}} == \
            {**b.obj, "metadata": {**b.obj["metadata"], **same}}
        assert a.raw.replace(a.obj["metadata"]["uid"].encode(), b"x").replace(f'"{a.rv}"'.encode(), b'"x"') == \
            b.raw.replace(b.obj["metadata"]["uid"].encode(), b"x").replace(f'"{b.rv}"'.encode(), b'"x"')
        assert b.obj["metadata"]["managedFields"][0]["time"] != "2026-01-01T00:00:00Z" or step == 0
    for watcher in watches:
        events = []
        while batch := watcher._take(100):
            events.extend(batch)
        assert [t for t, _, _ in events] == ["MODIFIED"] * 3
        watcher.close()


def test_renewal_to_the_stored_time_writes_nothing() -> None:
    api = ApiServer(FakeClock())
    api.create(LEASES, lease("node-1"), NS, field_manager="kubelet")
    stored = api.get_stored(LEASES, NS, "node-1")
    assert renew_in_place(api, stored, holder="node-1", duration=40, renew_time=stored.obj["spec"]["renewTime"],
                          manager="kubelet", now=api.clock.now())
    assert api.get_stored(LEASES, NS, "node-1") is stored


def test_renewal_not_certain_writes_nothing() -> None:
    api = ApiServer(FakeClock())
    api.create(LEASES, lease("node-1"), NS, field_manager="kubelet")
    renew = format_micro_time(api.clock.now() + 5)

    def attempt(**kwargs: Any) -> bool:
        before = api.get_stored(LEASES, NS, "node-1")
        args = {"holder": "node-1", "duration": 40, "renew_time": renew, "manager": "kubelet", "now": api.clock.now(),
                **kwargs}
        done = renew_in_place(api, before, **args)
        if not done:
            assert api.get_stored(LEASES, NS, "node-1") is before
        return done

    assert not attempt(holder="node-2")  # the holder changes
    assert not attempt(duration=15)  # so does the duration
    assert not attempt(manager="someone-else")  # a new manager's entry would be added
    # Another manager owns a field: the update would take renewTime from it, or add a second entry.
    current = api.get(LEASES, NS, "node-1")
    api.update(LEASES, {**current, "spec": {**current["spec"], "leaseTransitions": 1}}, field_manager="ha-tool")
    assert not attempt()
