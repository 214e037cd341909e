"""The bootstrap signer (kube-controller-manager's ``bootstrap-signer-controller``, off by default;
``pkg/controller/bootstrap/bootstrapsigner.go``): signs ``kube-public/cluster-info`` with bootstrap tokens.

``kubeadm join`` reads that ConfigMap anonymously and trusts its kubeconfig only if a ``jws-kubeconfig-<id>``
entry verifies with the token it was given.

Guarantees:
- One key, ``kube-public/cluster-info``, on queue ``bootstrap_signer_queue``, one worker. It is enqueued when
  that ConfigMap is added or updated, and when a ``bootstrap.kubernetes.io/token`` Secret in ``kube-system`` is
  added, updated or deleted; other objects are ignored.
- A sync reads the cached ConfigMap (missing: nothing to do) and its ``kubeconfig`` entry (missing: nothing to
  do). Every valid signing token of the cache (see :func:`..secrets.validate_secret_for_signing`; a duplicate id
  is ignored) gets ``jws-kubeconfig-<id>`` = the detached HS256 JWS of the kubeconfig; entries of tokens no
  longer valid are removed. Only when that changes anything is the ConfigMap updated (from the cached copy, so
  its resourceVersion guards the write); Conflict and NotFound are ignored (a new event follows), other
  failures are logged. Nothing is retried: as upstream, the next event or resync brings it back.
- Tokens are checked for expiry when a sync runs; an expired token's signature goes at the next sync (the token
  cleaner deleting the Secret triggers one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import CONFIGMAPS, SECRETS
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.controllers.bootstrap.jws import compute_detached_signature
from controller_manager.controllers.bootstrap.secrets import (
    CONFIGMAP_CLUSTER_INFO,
    JWS_SIGNATURE_KEY_PREFIX,
    KUBECONFIG_KEY,
    SECRET_TYPE_BOOTSTRAP_TOKEN,
    validate_secret_for_signing,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Deleted, Event, Updated

__all__ = ["BootstrapSigner"]

Obj = Mapping[str, Any]


class BootstrapSigner(Controller):
    name: ClassVar[str] = "bootstrap-signer-controller"
    alias: ClassVar[str] = "bootstrapsigner"
    enabled_by_default: ClassVar[bool] = False
    queue_name: ClassVar[str | None] = "bootstrap_signer_queue"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext, *, config_map_namespace: str = "kube-public",
                 config_map_name: str = CONFIGMAP_CLUSTER_INFO, token_secret_namespace: str = "kube-system") -> None:
        super().__init__(ctx)
        self.config_map_namespace = config_map_namespace
        self.config_map_name = config_map_name
        self.config_map_key = f"{config_map_namespace}/{config_map_name}"
        self.secret_namespace = token_secret_namespace
        self.cm_informer = ctx.informers.informer(CONFIGMAPS)
        self.cm_informer.add_handler(self._on_config_map)
        self.secret_informer = ctx.informers.informer(SECRETS)
        self.secret_informer.add_handler(self._on_secret)

    def _on_config_map(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        cm = event.new if isinstance(event, Updated) else event.obj
        m = meta(cm)
        if m.get("name") == self.config_map_name and m.get("namespace") == self.config_map_namespace:
            self.queue.add(self.config_map_key)

    def _on_secret(self, event: Event) -> None:
        secret = event.new if isinstance(event, Updated) else event.obj
        if secret.get("type") == SECRET_TYPE_BOOTSTRAP_TOKEN and meta(secret).get("namespace") == self.secret_namespace:
            self.queue.add(self.config_map_key)

    async def sync(self, key: str) -> Result | None:
        await self.sign_config_map()
        return None

    def tokens(self) -> dict[str, str]:
        """token id -> token secret, for every cached token that may sign (``getTokens``)."""
        out: dict[str, str] = {}
        now = self.ctx.clock.now()
        for secret in self.secret_informer.store.by_index("namespace", self.secret_namespace):
            if secret.get("type") != SECRET_TYPE_BOOTSTRAP_TOKEN:
                continue
            valid = validate_secret_for_signing(secret, now)
            if valid is None:
                continue
            token_id, token_secret = valid
            if token_id in out:
                self.log.info("duplicate bootstrap tokens found for id, ignoring on the duplicate one",
                              token_id=token_id, ignored_secret=f"{self.secret_namespace}/{meta(secret).get('name')}")
                continue
            out[token_id] = token_secret
        return out

    async def sign_config_map(self) -> None:
        cm = self.cm_informer.store.get(self.config_map_key)
        if cm is None:
            return
        data = dict(cm.get("data") or {})
        content = data.get(KUBECONFIG_KEY)
        if content is None:
            self.log.debug("no key in ConfigMap", key=KUBECONFIG_KEY, config_map=self.config_map_key)
            return
        old = {k[len(JWS_SIGNATURE_KEY_PREFIX):]: data.pop(k) for k in list(data)
               if k.startswith(JWS_SIGNATURE_KEY_PREFIX)}
        need_update = False
        for token_id, token_secret in self.tokens().items():
            signature = compute_detached_signature(str(content), token_id, token_secret)
            if old.pop(token_id, None) != signature:
                need_update = True
            data[JWS_SIGNATURE_KEY_PREFIX + token_id] = signature
        if old:
            need_update = True  # signatures of tokens that no longer sign
        if not need_update:
            return
        try:
            await self.ctx.client.update(CONFIGMAPS, {**cm, "data": data})
        except (Conflict, NotFound):
            return
        except ApiError as err:
            self.log.info("error updating ConfigMap", config_map=self.config_map_key, error=str(err))
