"""authentication.k8s.io and authorization.k8s.io review kinds (``pkg/registry/authentication``,
``pkg/registry/authorization``): never stored; a create is answered by the authenticator or authorizer
(:mod:`controller_manager.sim.apiserver.auth`), and NamespaceLifecycle does not apply to them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.auth import User
    from controller_manager.sim.apiserver.server import ApiServer


class ReviewStrategy(Strategy):
    namespace_lifecycle = False
    decodes_body = False

    def __init__(self, group: str, kind: str) -> None:
        self.group = group
        self.kind = kind

    def answer_create(self, api: ApiServer, res: Resource, subresource: str | None, namespace: str | None,
                      name: str, body: Any, user: User, dry_run: bool) -> Obj | None:
        assert api.auth is not None
        return api.auth.review(res.kind, body, user, namespace or "")


STRATEGIES: tuple[Strategy, ...] = (
    ReviewStrategy("authentication.k8s.io", "TokenReview"),
    ReviewStrategy("authentication.k8s.io", "SelfSubjectReview"),
    ReviewStrategy("authorization.k8s.io", "SubjectAccessReview"),
    ReviewStrategy("authorization.k8s.io", "SelfSubjectAccessReview"),
    ReviewStrategy("authorization.k8s.io", "LocalSubjectAccessReview"),
    ReviewStrategy("authorization.k8s.io", "SelfSubjectRulesReview"))
