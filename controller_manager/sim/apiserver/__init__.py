"""kube-sim's API server emulator: :class:`ApiServer` (storage semantics, in-process calls) and
:func:`build_app` (its HTTP face). See ``docs/internals.md`` ("sim/")."""

from controller_manager.sim.apiserver.errors import StatusError
from controller_manager.sim.apiserver.http import API_KEY, build_app
from controller_manager.sim.apiserver.server import ApiServer, ApiServerOptions, ListResult
from controller_manager.sim.apiserver.watch import Watcher

__all__ = ["API_KEY", "ApiServer", "ApiServerOptions", "ListResult", "StatusError", "Watcher", "build_app"]
