"""The bootstrap token cleaner (kube-controller-manager's ``token-cleaner-controller``, off by default;
``pkg/controller/bootstrap/tokencleaner.go``): deletes expired bootstrap token Secrets.

Guarantees:
- Keys are ``namespace/name`` of ``bootstrap.kubernetes.io/token`` Secrets in ``kube-system``, enqueued when
  added or updated (other Secrets are ignored), on queue ``token_cleaner`` with one worker.
- A sync reads the cached Secret (gone: done). Its ``expiration`` passed or unparseable: it is deleted with a
  uid precondition (NotFound and Conflict are ignored, other failures logged, not retried: as upstream).
  Not yet expired: the key comes back when it expires. No ``expiration``: it is never deleted.
- A sync that fails on the cache (it cannot) would be retried with backoff, as upstream's processNextWorkItem.
"""

from __future__ import annotations

from typing import ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import SECRETS
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.controllers.bootstrap.secrets import SECRET_TYPE_BOOTSTRAP_TOKEN, get_expiration
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Deleted, Event, Updated

__all__ = ["TokenCleaner"]


class TokenCleaner(Controller):
    name: ClassVar[str] = "token-cleaner-controller"
    alias: ClassVar[str] = "tokencleaner"
    enabled_by_default: ClassVar[bool] = False
    queue_name: ClassVar[str | None] = "token_cleaner"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext, *, token_secret_namespace: str = "kube-system") -> None:
        super().__init__(ctx)
        self.token_secret_namespace = token_secret_namespace
        self.secret_informer = ctx.informers.informer(SECRETS)
        self.secret_informer.add_handler(self._on_secret)

    def _on_secret(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        secret = event.new if isinstance(event, Updated) else event.obj
        m = meta(secret)
        if secret.get("type") == SECRET_TYPE_BOOTSTRAP_TOKEN and m.get("namespace") == self.token_secret_namespace:
            self.queue.add(f"{m.get('namespace')}/{m.get('name')}")

    async def sync(self, key: str) -> Result | None:
        secret = self.secret_informer.store.get(key)
        if secret is None:
            self.log.debug("secret has been deleted", secret=key)
            return None
        if secret.get("type") != SECRET_TYPE_BOOTSTRAP_TOKEN:
            return None
        remaining, expired = get_expiration(secret, self.ctx.clock.now())
        if expired:
            m = meta(secret)
            self.log.info("deleting expired secret", secret=key)
            try:
                await self.ctx.client.delete(SECRETS, str(m.get("name")), str(m.get("namespace")),
                                             uid=str(m.get("uid") or "") or None)
            except (Conflict, NotFound):
                pass
            except ApiError as err:
                self.log.info("error deleting secret", secret=key, error=str(err))
            return None
        if remaining > 0:
            return Result(requeue_after=remaining)
        return None
