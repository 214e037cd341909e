"""The service account controller: makes sure the ServiceAccounts every namespace needs exist
(kube-controller-manager's ``serviceaccount-controller``,
``pkg/controller/serviceaccount/serviceaccounts_controller.go``).

Without a ``default`` ServiceAccount, the API server's ServiceAccount admission refuses every pod that names
none, so a namespace is unusable until this controller has run.

Guarantees:
- Keys are namespace names. A namespace added or updated (resyncs included) is synced; a deleted
  ServiceAccount syncs its namespace, whatever its name (the sync decides whether it was one of ours).
- A sync creates, in an ``Active`` namespace, each ServiceAccount to ensure (``default`` unless told otherwise)
  that the cache does not hold. A namespace missing from the cache, or not ``Active`` (``Terminating``), gets
  nothing: the namespace controller is emptying it.
- ``AlreadyExists`` (our cache was behind) and a refusal because the namespace is terminating are success.
  Other create failures of one sync are gathered and raised together (one error as itself), so the runner
  retries the namespace with backoff; the ServiceAccounts already present are never touched.
- One worker, as upstream (``Run(ctx, 1)``: kube-controller-manager has no flag for it). Queue ``serviceaccount``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import NAMESPACES, SERVICEACCOUNTS
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, AlreadyExists, ApiError, has_status_cause
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated

__all__ = ["DEFAULT_SERVICE_ACCOUNTS", "NAMESPACE_TERMINATING_CAUSE", "CreateErrors", "ServiceAccountsController",
           "is_namespace_terminating_error"]

Obj = Mapping[str, Any]

# DefaultServiceAccountsControllerOptions: only "default" is ensured.
DEFAULT_SERVICE_ACCOUNTS: tuple[Obj, ...] = ({"metadata": {"name": "default"}},)


def is_namespace_terminating_error(err: BaseException) -> bool:
    """``errors.HasStatusCause(err, NamespaceTerminatingCause)``."""
    return has_status_cause(err, NAMESPACE_TERMINATING_CAUSE)


class CreateErrors(Exception):
    """Several creates of one sync failed (``utilerrors.NewAggregate``): the message lists them all."""

    def __init__(self, errors: Sequence[BaseException]) -> None:
        self.errors = list(errors)
        super().__init__("[" + ", ".join(str(e) or type(e).__name__ for e in self.errors) + "]")


class ServiceAccountsController(Controller):
    """Namespaces -> their ServiceAccounts to ensure. Its queue holds namespace names."""

    name: ClassVar[str] = "serviceaccount-controller"
    alias: ClassVar[str] = "serviceaccount"
    queue_name: ClassVar[str | None] = "serviceaccount"
    workers_option: ClassVar[str | None] = None  # upstream runs exactly one worker, with no flag
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext, service_accounts: Sequence[Obj] = DEFAULT_SERVICE_ACCOUNTS) -> None:
        super().__init__(ctx)
        # Templates of the ServiceAccounts to ensure; only their name is looked up in the cache.
        self.service_accounts: tuple[Obj, ...] = tuple(service_accounts)
        self.sa_informer = ctx.informers.informer(SERVICEACCOUNTS)
        self.sa_informer.add_handler(self._on_service_account)
        self.ns_informer = ctx.informers.informer(NAMESPACES)
        self.ns_informer.add_handler(self._on_namespace)

    # --- event handlers: they only enqueue namespace names --------------------------------------------

    def _on_service_account(self, event: Event) -> None:
        # Only a deletion can leave a namespace without one of its ServiceAccounts.
        if isinstance(event, Deleted):
            namespace = meta(event.obj).get("namespace")
            if namespace:
                self.queue.add(str(namespace))

    def _on_namespace(self, event: Event) -> None:
        if isinstance(event, Added | Updated):
            ns = event.obj if isinstance(event, Added) else event.new
            name = meta(ns).get("name")
            if name:
                self.queue.add(str(name))

    # --- sync ---------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        ns = self.ns_informer.store.get(key)
        if ns is None:
            return None
        if (ns.get("status") or {}).get("phase") != "Active":
            # A namespace being deleted gets nothing new: the namespace controller is emptying it.
            return None
        failures: list[BaseException] = []
        for template in self.service_accounts:
            sa_name = str(meta(template).get("name") or "")
            if self.sa_informer.store.get(f"{key}/{sa_name}") is not None:
                continue
            try:
                await self.ctx.client.create(SERVICEACCOUNTS, new_service_account(template, key), key)
            except AlreadyExists:
                continue  # our cache was behind: it exists, which is all we want
            except ApiError as err:
                if not is_namespace_terminating_error(err):
                    failures.append(err)
                continue
            self.log.info("created service account", key=key, name=sa_name)
        self.log.debug("finished syncing namespace", key=key)
        if len(failures) == 1:
            raise failures[0]
        if failures:
            raise CreateErrors(failures)
        return None


def new_service_account(template: Obj, namespace: str) -> dict[str, Any]:
    """The ServiceAccount to create in ``namespace``: the template with its namespace set (a new dict)."""
    body: dict[str, Any] = {k: v for k, v in template.items() if k != "metadata"}
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "ServiceAccount")
    body["metadata"] = {**meta(template), "namespace": namespace}
    return body
