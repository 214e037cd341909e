"""The approving controller's tables (sarapprove_test.go TestHandle, TestRecognizers) with a recording client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.resources import Resource
from controller_manager.clock import FakeClock
from controller_manager.controllers.certificates import CSRApprovingController
from controller_manager.controllers.certificates.approver import is_node_client_cert, is_self_node_client_cert
from controller_manager.controllers.certificates.csr import parse_csr
from controller_manager.runtime.controller import RATE_LIMITED, ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.certificates.pki import csr_object, csr_pem

KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
CLIENT_USAGES = ["digital signature", "key encipherment", "client auth"]


@dataclass
class Recorder:
    allowed: set[str] = field(default_factory=set)  # subresources the SubjectAccessReview allows
    sar_error: Exception | None = None
    actions: list[tuple[str, Any]] = field(default_factory=list)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        attrs = obj["spec"]["resourceAttributes"]
        self.actions.append(("create subjectaccessreviews", obj["spec"]))
        if self.sar_error is not None:
            raise self.sar_error
        return {**obj, "status": {"allowed": attrs["subresource"] in self.allowed}}

    async def update_subresource(self, res: Resource, obj: Mapping[str, Any], subresource: str) -> dict[str, Any]:
        self.actions.append((f"update {res.plural}/{subresource}", obj))
        return dict(obj)


def new_controller(client: Recorder) -> CSRApprovingController:
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return CSRApprovingController(ctx)


def kubelet_csr(*, username: str = "system:node:node-1", cn: str = "system:node:node-1",
                signer: str = KUBELET_CLIENT, usages: list[str] | None = None,
                conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj = csr_object("csr", csr_pem(cn), signer, CLIENT_USAGES if usages is None else usages, username=username)
    obj["spec"]["groups"] = ["system:nodes", "system:authenticated"]  # type: ignore[index]
    obj["spec"]["uid"] = "uid-1"  # type: ignore[index]
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
    return obj


@pytest.mark.parametrize(("csr", "allowed", "approved", "subresources", "result"), [
    # recognized as both; SAR for the self kind allows it
    (kubelet_csr(), {"selfnodeclient"}, "Auto approving self kubelet client certificate after SubjectAccessReview.",
     ["selfnodeclient"], None),
    # self not allowed, node allowed
    (kubelet_csr(), {"nodeclient"}, "Auto approving kubelet client certificate after SubjectAccessReview.",
     ["selfnodeclient", "nodeclient"], None),
    # not the requester's own name: only nodeclient is tried
    (kubelet_csr(username="system:node:other"), {"nodeclient", "selfnodeclient"},
     "Auto approving kubelet client certificate after SubjectAccessReview.", ["nodeclient"], None),
    # recognized but no SAR allows it: an ignorable error (backoff)
    (kubelet_csr(), set(), None, ["selfnodeclient", "nodeclient"], RATE_LIMITED),
    # not a kubelet client CSR: nothing asked, nothing done
    (kubelet_csr(signer="kubernetes.io/kube-apiserver-client"), {"nodeclient"}, None, [], None),
    (kubelet_csr(cn="alice"), {"nodeclient"}, None, [], None),
    (kubelet_csr(usages=["client auth"]), {"nodeclient"}, None, [], None),
    # already approved or denied
    (kubelet_csr(conditions=[{"type": "Approved", "status": "True"}]), {"nodeclient"}, None, [], None),
    (kubelet_csr(conditions=[{"type": "Denied", "status": "True"}]), {"nodeclient"}, None, [], None),
])
async def test_handle(csr: dict[str, Any], allowed: set[str], approved: str | None, subresources: list[str],
                      result: object) -> None:
    client = Recorder(allowed=allowed)
    controller = new_controller(client)
    assert await controller.handle(csr) == result
    reviews = [spec for verb, spec in client.actions if verb == "create subjectaccessreviews"]
    assert [r["resourceAttributes"]["subresource"] for r in reviews] == subresources
    for review in reviews:
        assert review["user"] == csr["spec"]["username"]
        assert review["uid"] == "uid-1"
        assert review["groups"] == ["system:nodes", "system:authenticated"]
        assert review["resourceAttributes"] == {
            "group": "certificates.k8s.io", "resource": "certificatesigningrequests", "verb": "create",
            "subresource": review["resourceAttributes"]["subresource"], "version": "*"}
    updates = [obj for verb, obj in client.actions if verb == "update certificatesigningrequests/approval"]
    if approved is None:
        assert updates == []
    else:
        assert len(updates) == 1
        assert updates[0]["status"]["conditions"][-1] == {
            "type": "Approved", "status": "True", "reason": "AutoApproved", "message": approved}


async def test_sar_error_is_retried() -> None:
    controller = new_controller(Recorder(sar_error=RuntimeError("sar failed")))
    with pytest.raises(RuntimeError, match="sar failed"):
        await controller.handle(kubelet_csr())


async def test_unparseable_request_is_an_error() -> None:
    csr = kubelet_csr()
    csr["spec"]["request"] = "bm90IGEgcmVxdWVzdA=="  # "not a request"
    with pytest.raises(ValueError, match="unable to parse csr 'csr': PEM block type must be CERTIFICATE REQUEST"):
        await new_controller(Recorder()).handle(csr)


@pytest.mark.parametrize(("cn", "orgs", "dns", "usages", "username", "node", "self_node"), [
    ("system:node:n", ("system:nodes",), (), CLIENT_USAGES, "system:node:n", True, True),
    ("system:node:n", ("system:nodes",), (), ["digital signature", "client auth"], "system:node:n", True, True),
    ("system:node:n", ("system:nodes",), (), CLIENT_USAGES, "bob", True, False),
    ("system:node:n", ("system:nodes", "extra"), (), CLIENT_USAGES, "system:node:n", False, False),
    ("system:node:n", (), (), CLIENT_USAGES, "system:node:n", False, False),
    ("node:n", ("system:nodes",), (), CLIENT_USAGES, "node:n", False, False),
    ("system:node:n", ("system:nodes",), ("n.example",), CLIENT_USAGES, "system:node:n", False, False),
    ("system:node:n", ("system:nodes",), (), [*CLIENT_USAGES, "server auth"], "system:node:n", False, False),
    ("system:node:n", ("system:nodes",), (), ["key encipherment", "client auth"], "system:node:n", False, False),
])
def test_recognizers(cn: str, orgs: tuple[str, ...], dns: tuple[str, ...], usages: list[str], username: str,
                     node: bool, self_node: bool) -> None:
    pem = csr_pem(cn, orgs, dns=dns)
    csr = csr_object("csr", pem, KUBELET_CLIENT, usages, username=username)
    req = parse_csr(pem)
    assert is_node_client_cert(csr, req) is node
    assert is_self_node_client_cert(csr, req) is self_node
    other = csr_object("csr", pem, "kubernetes.io/legacy-unknown", usages, username=username)
    assert not is_node_client_cert(other, req)
