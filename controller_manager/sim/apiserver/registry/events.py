"""events.k8s.io kinds (``pkg/registry/core/event``, which serves both APIs): an events.k8s.io/v1 Event is
validated in its own form, then converted and stored as a core/v1 Event, in the core Event's store, by the core
Event's strategy; it is shown converted back (see :mod:`controller_manager.sim.apiserver.events`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import EVENTS, Resource
from controller_manager.sim.apiserver import events
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, Write
from controller_manager.sim.apiserver.registry.core import EVENT
from controller_manager.sim.apiserver.watch import View

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class EventStrategy(Strategy):
    group = "events.k8s.io"
    kind = "Event"
    allow_create_on_update = True

    def store_key(self, res: Resource) -> tuple[str, str]:
        return EVENT.store_key(EVENTS)

    def storage(self, res: Resource) -> Resource:
        return EVENTS

    def view(self, res: Resource) -> View | None:
        return lambda s: s.view("events.k8s.io/v1", events.to_v1)

    def create_steps(self, w: Write, obj: Obj) -> Obj:
        self.check(w, obj, None)
        return EVENT.prepare_for_create(w.on(EVENTS), events.to_core(obj))

    def update_steps(self, w: Write, obj: Obj, old: Obj) -> Obj:
        self.check(w, obj, events.to_v1(old))
        return EVENT.prepare_for_update(w.on(EVENTS), events.to_core(obj), old)

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        EVENT.after_write(api, EVENTS, obj)

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        EVENT.after_remove(api, EVENTS, obj)


STRATEGIES: tuple[Strategy, ...] = (EventStrategy(),)
