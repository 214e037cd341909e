"""``controller-manager``: the console entry point.

Guarantees:
- ``main(argv)`` parses flags, validates ``--controllers`` against the registry, configures logging, then
  runs :class:`~controller_manager.manager.app.Manager` on uvloop when it is installed (asyncio otherwise)
  and returns the process exit code: 0 after a clean stop, 1 on any startup error or lost lease.
- A bad flag or controller name is one ``Error: ...`` line on stderr and exit code 1 (cobra's behaviour);
  ``--help`` prints every flag with its default and exits 0. Nothing else is ever written with print().
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from controller_manager import gctuning
from controller_manager.manager.logging import configure_logging
from controller_manager.manager.options import OptionsError, parse_options
from controller_manager.manager.registry import UnknownControllersError, default_registry


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main(argv: Sequence[str] | None = None) -> int:
    registry = default_registry()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        options = parse_options(args, registry.names(), registry.disabled_by_default())
        selection = registry.select(options.controllers)
    except (OptionsError, UnknownControllersError) as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    configure_logging(options.log_format, options.v)
    gctuning.configure()
    gctuning.pin_mmap_threshold()

    # Imported here so --help and flag errors stay fast and never touch the runtime.
    from controller_manager.manager.app import Manager

    def hard_exit(code: int) -> None:
        sys.stderr.flush()
        os._exit(code)

    async def run() -> int:
        return await Manager(options, selection, hard_exit=hard_exit).run()

    runner_args: dict[str, Any] = {}
    factory = _loop_factory()
    if factory is not None:
        runner_args["loop_factory"] = factory
    try:
        with asyncio.Runner(**runner_args) as runner:
            return runner.run(run())
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return 1


if __name__ == "__main__":
    sys.exit(main())
