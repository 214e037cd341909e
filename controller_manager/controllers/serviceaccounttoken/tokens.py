"""The service account token controller (kube-controller-manager's ``serviceaccount-token-controller``,
``pkg/controller/serviceaccount/tokens_controller.go``): fills ``kubernetes.io/service-account-token`` Secrets.

A Secret of that type, annotated ``kubernetes.io/service-account.name`` (and optionally ``.uid``), gets a legacy
token for that ServiceAccount: upstream stopped *creating* such Secrets in 1.24, but still fills and cleans up
the ones users create.

Guarantees:
- Runs only with ``--service-account-private-key-file`` (upstream logs that it is disabled otherwise and starts
  nothing); a key file that cannot be read fails the start. ``--root-ca-file`` (checked to hold a certificate)
  is the ``ca.crt`` written, else the CA the daemon's client trusts (upstream: the root client's CA data).
- Two queues, both named ``serviceaccount_tokens_service`` as upstream 1.37 names them (its secret queue's
  name is a copy of the service account queue's), with ``--concurrent-serviceaccount-token-syncs`` workers each:
  - ServiceAccounts added, updated or deleted enqueue ``namespace/name/uid``. A sync finds the ServiceAccount in
    the cache with that uid or, if it is gone (or its uid changed), deletes every token Secret of the cache
    annotated for that name (and that uid, when the Secret says one) with a uid precondition.
  - Token Secrets (others are filtered out) added, updated or deleted enqueue (namespace, name, uid,
    ServiceAccount name, ServiceAccount uid). A Secret gone from the cache: its name is removed from the
    ServiceAccount's ``secrets`` (fresh GET then update, retried on conflict up to 10 times as
    ``RemoveTokenBackoff``) when the account still exists. A Secret whose ServiceAccount is not in the cache nor
    on the server (live GET) with the annotated uid is deleted (uid precondition). Otherwise, when the cached
    Secret lacks ``token`` or ``namespace`` data or its ``ca.crt`` differs from the root CA, a fresh copy is read
    (skipped if its resourceVersion is not the cached one) and updated with what is missing, the token signed
    for the account, and the name/uid annotations set.
  - NotFound and Conflict end a sync quietly; other write failures are retried with backoff up to 10 times
    (``maxRetries``), then the key is dropped until its next event. Keys that cannot be parsed are dropped.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from cryptography import x509

from controller_manager.api.meta import meta
from controller_manager.api.resources import SECRETS, SERVICEACCOUNTS
from controller_manager.client.errors import ApiError, Conflict, NotFound
from controller_manager.controllers.serviceaccounttoken.jwt import (
    InvalidKeyFile,
    TokenGenerator,
    legacy_claims,
    load_private_key,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result, TerminalError
from controller_manager.runtime.informers import Event, Updated
from controller_manager.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = ["MAX_RETRIES", "QUEUE_NAME", "SERVICE_ACCOUNT_NAME_KEY", "SERVICE_ACCOUNT_TOKEN_TYPE",
           "SERVICE_ACCOUNT_UID_KEY", "SecretKey", "TokensController", "is_service_account_token", "read_ca"]

Obj = Mapping[str, Any]

SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"
SERVICE_ACCOUNT_UID_KEY = "kubernetes.io/service-account.uid"
TOKEN_KEY = "token"
NAMESPACE_KEY = "namespace"
ROOT_CA_KEY = "ca.crt"
QUEUE_NAME = "serviceaccount_tokens_service"
MAX_RETRIES = 10
# RemoveTokenBackoff: 10 steps from 100ms, jitter 1.0 (so each wait is 100-200ms).
REMOVE_TOKEN_STEPS = 10
REMOVE_TOKEN_DURATION = 0.1


class SecretKey(NamedTuple):
    """``secretQueueKey``: enough to find the cached Secret, or clean up its account's reference to it."""

    namespace: str
    name: str
    uid: str
    sa_name: str
    sa_uid: str  # empty when the Secret carries no uid annotation


class InvalidKey(Exception):
    pass


def read_ca(path: str) -> bytes:
    """``--root-ca-file``'s content, which must hold at least one PEM certificate (upstream ``readCA``)."""
    try:
        data = Path(path).read_bytes()
        x509.load_pem_x509_certificates(data)
    except (OSError, ValueError) as err:
        raise ValueError(f"error parsing root-ca-file at {path}: {err}") from err
    return data


def root_ca(options: Mapping[str, Any], client_config: Any) -> bytes:
    path = str(options.get("root_ca_file") or "")
    if path:
        return read_ca(path)
    ca_file = getattr(client_config, "ca_file", None)
    if not ca_file:
        return b""
    return Path(ca_file).read_bytes()


def _decoded(secret: Obj, key: str) -> bytes:
    value = (secret.get("data") or {}).get(key)
    if not value:
        return b""
    try:
        return base64.b64decode(str(value))
    except ValueError:
        return b""


def _annotations(obj: Obj) -> Mapping[str, str]:
    return meta(obj).get("annotations") or {}


def is_service_account_token(secret: Obj, service_account: Obj) -> bool:
    """``serviceaccount.IsServiceAccountToken``: the Secret's type and annotations name this account."""
    if secret.get("type") != SERVICE_ACCOUNT_TOKEN_TYPE:
        return False
    annotations = _annotations(secret)
    sa_meta = meta(service_account)
    if annotations.get(SERVICE_ACCOUNT_NAME_KEY) != sa_meta.get("name"):
        return False
    uid = annotations.get(SERVICE_ACCOUNT_UID_KEY)
    return not uid or uid == sa_meta.get("uid")


def secret_key_of(secret: Obj) -> SecretKey:
    m = meta(secret)
    annotations = _annotations(secret)
    return SecretKey(str(m.get("namespace") or ""), str(m.get("name") or ""), str(m.get("uid") or ""),
                     str(annotations.get(SERVICE_ACCOUNT_NAME_KEY) or ""),
                     str(annotations.get(SERVICE_ACCOUNT_UID_KEY) or ""))


class TokensController(Controller):
    """ServiceAccounts and their token Secrets. Its own queue holds ``namespace/name/uid`` of ServiceAccounts;
    :attr:`secret_queue` holds :class:`SecretKey` tuples."""

    name: ClassVar[str] = "serviceaccount-token-controller"
    alias: ClassVar[str] = "serviceaccount-token"
    queue_name: ClassVar[str | None] = QUEUE_NAME
    workers_option: ClassVar[str | None] = "concurrent-serviceaccount-token-syncs"
    default_workers: ClassVar[int] = 5
    max_retries: ClassVar[int | None] = MAX_RETRIES

    def __init__(self, ctx: ControllerContext, *, generator: TokenGenerator | None = None,
                 root_ca_data: bytes | None = None) -> None:
        super().__init__(ctx)
        key_file = str(ctx.options.get("service_account_private_key_file") or "")
        self.enabled = generator is not None or bool(key_file)
        self.secret_queue: RateLimitingQueue[SecretKey] = RateLimitingQueue(
            QUEUE_NAME, rate_limiter=default_controller_rate_limiter(ctx.clock), clock=ctx.clock)
        if not self.enabled:
            self.log.info("controller is disabled because there is no private key")
            return
        try:
            self.generator = generator if generator is not None else TokenGenerator(load_private_key(key_file))
        except InvalidKeyFile as err:
            raise InvalidKeyFile(f"error reading key for service account token controller: {err}") from err
        self.root_ca = root_ca_data if root_ca_data is not None else root_ca(
            ctx.options, getattr(ctx.client, "config", None))
        self.sa_informer = ctx.informers.informer(SERVICEACCOUNTS)
        self.sa_informer.add_handler(self._on_service_account)
        self.secret_informer = ctx.informers.informer(SECRETS)
        self.secret_informer.add_handler(self._on_secret)

    def workers(self) -> int:
        return super().workers() if self.enabled else 0

    async def run_background(self) -> None:
        try:
            await self.run_queue(self.secret_queue, self.sync_secret, workers=max(1, self.workers()),
                                 describe=lambda k: f"{k.namespace}/{k.name}", max_retries=self.max_retries)
        finally:
            self.secret_queue.shut_down()

    # --- event handlers ---------------------------------------------------------------------------------

    def _on_service_account(self, event: Event) -> None:
        sa = event.new if isinstance(event, Updated) else event.obj
        m = meta(sa)
        self.queue.add(f"{m.get('namespace') or ''}/{m.get('name') or ''}/{m.get('uid') or ''}")

    def _on_secret(self, event: Event) -> None:
        secret = event.new if isinstance(event, Updated) else event.obj
        if secret.get("type") != SERVICE_ACCOUNT_TOKEN_TYPE:
            return
        self.secret_queue.add(secret_key_of(secret))

    # --- the ServiceAccount queue -----------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        parts = key.split("/")
        if len(parts) != 3 or not all(parts):
            raise TerminalError(f"invalid serviceaccount key: {key!r}")
        namespace, name, uid = parts
        if self._cached_service_account(namespace, name, uid) is not None:
            return None
        self.log.debug("service account deleted, removing tokens", namespace=namespace, serviceaccount=name)
        gone = {"metadata": {"namespace": namespace, "name": name, "uid": uid}}
        tokens = [s for s in self.secret_informer.store.by_index("namespace", namespace)
                  if is_service_account_token(s, gone)]
        retry = False
        errors: list[BaseException] = []
        for token in tokens:
            m = meta(token)
            retriable, err = await self._delete_token(namespace, str(m.get("name")), str(m.get("uid") or ""))
            retry = retry or retriable
            if err is not None:
                errors.append(err)
        if errors:
            message = "; ".join(str(e) for e in errors)
            if retry:
                raise RuntimeError(f"error deleting serviceaccount tokens for {namespace}/{name}: {message}")
            raise TerminalError(f"error deleting serviceaccount tokens for {namespace}/{name}: {message}")
        return None

    # --- the Secret queue -------------------------------------------------------------------------------

    async def sync_secret(self, key: SecretKey) -> Result | None:
        if not (key.namespace and key.name and key.uid and key.sa_name):
            raise TerminalError(f"invalid secret key: {key!r}")
        secret = self._cached_secret(key.namespace, key.name, key.uid)
        if secret is None:
            if self._cached_service_account(key.namespace, key.sa_name, key.sa_uid) is not None:
                await self._remove_secret_reference_with_retry(key)
            return None
        sa = await self._service_account(key.namespace, key.sa_name, key.sa_uid)
        if sa is None:
            self.log.debug("service account does not exist, deleting token", secret=f"{key.namespace}/{key.name}")
            retriable, err = await self._delete_token(key.namespace, key.name, key.uid)
            if err is not None:
                self._fail(retriable, f"deleting serviceaccount token {key.namespace}/{key.name}", err)
            return None
        retriable, err = await self._generate_token_if_needed(sa, secret)
        if err is not None:
            self._fail(retriable, f"populating serviceaccount token {key.namespace}/{key.name} for service "
                                  f"account {key.sa_name}", err)
        return None

    @staticmethod
    def _fail(retriable: bool, what: str, err: BaseException) -> None:
        if retriable:
            raise RuntimeError(f"{what}: {err}") from err
        raise TerminalError(f"{what}: {err}") from err

    async def _delete_token(self, namespace: str, name: str, uid: str) -> tuple[bool, BaseException | None]:
        """(retry?, error): NotFound (already gone) and Conflict (uid precondition failed) are success."""
        try:
            await self.ctx.client.delete(SECRETS, name, namespace, uid=uid or None)
        except (NotFound, Conflict):
            return False, None
        except ApiError as err:
            return True, err
        return False, None

    def _secret_update_needed(self, secret: Obj) -> tuple[bool, bool, bool]:
        needs_ca = bool(self.root_ca) and _decoded(secret, ROOT_CA_KEY) != self.root_ca
        needs_namespace = not _decoded(secret, NAMESPACE_KEY)
        needs_token = not _decoded(secret, TOKEN_KEY)
        return needs_ca, needs_namespace, needs_token

    async def _generate_token_if_needed(self, sa: Obj, cached: Obj) -> tuple[bool, BaseException | None]:
        if not any(self._secret_update_needed(cached)):
            return False, None
        m = meta(cached)
        try:
            live = await self.ctx.client.get(SECRETS, str(m.get("name")), str(m.get("namespace")))
        except NotFound as err:
            return False, err
        except ApiError as err:
            return True, err
        if meta(live).get("resourceVersion") != m.get("resourceVersion"):
            self.log.info("secret is not up to date, skipping token population",
                          secret=f"{m.get('namespace')}/{m.get('name')}")
            return False, None
        needs_ca, needs_namespace, needs_token = self._secret_update_needed(live)
        if not (needs_ca or needs_namespace or needs_token):
            return False, None
        data = dict(live.get("data") or {})
        if needs_ca:
            data[ROOT_CA_KEY] = base64.b64encode(self.root_ca).decode("ascii")
        if needs_namespace:
            data[NAMESPACE_KEY] = base64.b64encode(str(meta(live).get("namespace")).encode()).decode("ascii")
        if needs_token:
            try:
                token = self.generator.generate(legacy_claims(sa, live))
            except Exception as err:  # a signing failure is not retried (upstream returns false)
                return False, err
            data[TOKEN_KEY] = base64.b64encode(token.encode()).decode("ascii")
        sa_meta = meta(sa)
        annotations = {**(meta(live).get("annotations") or {}),
                       SERVICE_ACCOUNT_NAME_KEY: str(sa_meta.get("name")),
                       SERVICE_ACCOUNT_UID_KEY: str(sa_meta.get("uid") or "")}
        updated = {**live, "data": data, "metadata": {**meta(live), "annotations": annotations}}
        try:
            await self.ctx.client.update(SECRETS, updated)
        except (Conflict, NotFound):
            # Conflict: someone else updated it and we will hear of it; NotFound: no token is needed any more.
            return False, None
        except ApiError as err:
            return True, err
        return False, None

    async def _remove_secret_reference_with_retry(self, key: SecretKey) -> None:
        """``RetryOnConflict(RemoveTokenBackoff, removeSecretReference)``; a failure is logged, never retried."""
        for step in range(REMOVE_TOKEN_STEPS):
            try:
                await self._remove_secret_reference(key)
                return
            except Conflict as err:
                if step == REMOVE_TOKEN_STEPS - 1:
                    self.log.error("removing secret reference", secret=f"{key.namespace}/{key.name}", error=str(err))
                    return
                await self.ctx.clock.sleep(REMOVE_TOKEN_DURATION * (1.0 + random.random()))
            except ApiError as err:
                self.log.error("removing secret reference", secret=f"{key.namespace}/{key.name}", error=str(err))
                return

    async def _remove_secret_reference(self, key: SecretKey) -> None:
        try:
            sa = await self.ctx.client.get(SERVICEACCOUNTS, key.sa_name, key.namespace)
        except NotFound:
            return
        if key.sa_uid and key.sa_uid != meta(sa).get("uid"):
            return
        refs = list(sa.get("secrets") or ())
        if not any((r or {}).get("name") == key.name for r in refs):
            return
        updated = {**sa, "secrets": [r for r in refs if (r or {}).get("name") != key.name]}
        try:
            await self.ctx.client.update(SERVICEACCOUNTS, updated)
        except NotFound:
            return

    # --- lookups ------------------------------------------------------------------------------------------

    def _cached_service_account(self, namespace: str, name: str, uid: str) -> Obj | None:
        sa = self.sa_informer.store.get(f"{namespace}/{name}")
        if sa is not None and (not uid or uid == meta(sa).get("uid")):
            return sa
        return None

    async def _service_account(self, namespace: str, name: str, uid: str) -> Obj | None:
        """The ServiceAccount with that uid (if given): cache first, then a live GET; None when it is gone."""
        cached = self._cached_service_account(namespace, name, uid)
        if cached is not None:
            return cached
        try:
            live = await self.ctx.client.get(SERVICEACCOUNTS, name, namespace)
        except NotFound:
            return None
        if not uid or uid == meta(live).get("uid"):
            return live
        return None

    def _cached_secret(self, namespace: str, name: str, uid: str) -> Obj | None:
        secret = self.secret_informer.store.get(f"{namespace}/{name}")
        if secret is not None and (not uid or uid == meta(secret).get("uid")):
            return secret
        return None
