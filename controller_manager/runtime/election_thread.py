"""A Lease's renewals on a thread of their own, so a busy event loop cannot starve them.

Why: client-go renews from its own goroutine, which the Go scheduler preempts onto a CPU however busy the
other goroutines are. On one asyncio loop a renewal is just another callback: behind a start-up burst (every
informer's initial list decoded, every controller's first syncs) on a loaded machine it waited 6 s for its turn
in the chaos soak, past the renew deadline, and the new leader lost the Lease it had just won (20 of 57
leaderships in a 60-minute run on a 2-core machine at load 14). A thread gets the interpreter at least every
``sys.getswitchinterval()`` (5 ms) whatever the loop is doing, so the renewal is sent on time.

Guarantees:
- :meth:`ElectionThread.run` runs a coroutine on the thread's own event loop and returns its result (or raises
  its exception) in the caller's loop. Cancelling the caller cancels the coroutine there and waits for it to
  finish (bounded), so a cancelled renew loop has released its Lease before ``run`` returns.
- :meth:`ElectionThread.notify` runs a callback on the owner's loop (the loop that started the thread), for
  what must happen there: waking intake waiters, recording Events, leader-change hooks.
- The thread's objects (its HTTP client above all) must be used and closed on the thread: run their ``close()``
  through :meth:`run` before :meth:`stop`.
- :meth:`stop` ends the thread's loop and joins the thread; idempotent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

CANCEL_GRACE = 30.0  # seconds a cancelled coroutine may take to finish on the thread (a release is bounded less)


class ElectionThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._owner: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread and its loop; the calling loop becomes the owner. Idempotent."""
        if self._thread is not None:
            return
        self._owner = asyncio.get_running_loop()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=self.name, daemon=True)
        self._thread.start()

    def notify(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the owner's loop: at once when called there, else as soon as it gets to it."""
        owner = self._owner
        if owner is None or owner.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is owner:
            callback()
        else:
            with contextlib.suppress(RuntimeError):  # the owner's loop closed meanwhile: nobody is left to tell
                owner.call_soon_threadsafe(callback)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro``'s outcome, computed on the thread's loop."""
        self.start()
        assert self._loop is not None
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        state: dict[str, Any] = {"task": None, "cancelled": False}  # touched only on the thread's loop

        def begin() -> None:
            if state["cancelled"]:  # cancelled before it could start
                coro.close()
                future.cancel()
                return
            task = asyncio.ensure_future(coro)
            state["task"] = task

            def settle(done: asyncio.Task[T]) -> None:
                if done.cancelled():
                    future.cancel()
                elif (error := done.exception()) is not None:
                    future.set_exception(error)
                else:
                    future.set_result(done.result())

            task.add_done_callback(settle)

        def cancel() -> None:
            state["cancelled"] = True
            if state["task"] is not None:
                state["task"].cancel()

        self._loop.call_soon_threadsafe(begin)
        waiting = asyncio.wrap_future(future)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            if not future.done():
                self._loop.call_soon_threadsafe(cancel)
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(waiting), CANCEL_GRACE)
            raise

    def stop(self) -> None:
        """Stop the thread's loop and join the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
