"""The CSR cleaner's table (cleaner_test.go TestCleanerWithApprovedExpiredCSR), through ``clean_once`` with a
recording client, plus the hourly pass itself."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass, field
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controller_manager.api.resources import Resource
from controller_manager.clock import FakeClock
from controller_manager.controllers.certificates import CSRCleanerController
from controller_manager.controllers.certificates.cleaner import cleanup_reason
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory

NOW = 1_800_000_000.0


def _cert(not_after: float) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "*")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(datetime.datetime.fromtimestamp(not_after - 86400, datetime.UTC))
            .not_valid_after(datetime.datetime.fromtimestamp(not_after, datetime.UTC)).sign(key, hashes.SHA256()))
    return base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()


EXPIRED = _cert(NOW - 86400)
UNEXPIRED = _cert(NOW + 100 * 365 * 86400)
GARBAGE = base64.b64encode(b"garbage").decode()


def ts(seconds_ago: float) -> str:
    return datetime.datetime.fromtimestamp(NOW - seconds_ago, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, seconds_ago: float) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastUpdateTime": ts(seconds_ago)}


M, H = 60.0, 3600.0


@pytest.mark.parametrize(("created", "certificate", "conditions", "deleted"), [
    pytest.param(1 * M, UNEXPIRED, [cond("Approved", 50 * M)], False, id="no delete approved not passed deadline"),
    pytest.param(1 * M, None, [cond("Approved", 50 * M)], False, id="no delete approved passed deadline not issued"),
    pytest.param(1 * M, UNEXPIRED, [cond("Approved", 2 * H)], True, id="delete approved passed deadline"),
    pytest.param(1 * M, None, [cond("Denied", 50 * M)], False, id="no delete denied not passed deadline"),
    pytest.param(1 * M, None, [cond("Denied", 2 * H)], True, id="delete denied passed deadline"),
    pytest.param(1 * M, None, [cond("Approved", 2 * H), cond("Failed", 50 * M)], False,
                 id="no delete failed not passed deadline"),
    pytest.param(1 * M, None, [cond("Approved", 2 * H), cond("Failed", 2 * H)], True,
                 id="delete failed passed deadline"),
    pytest.param(5 * H, None, [], False, id="no delete pending not passed deadline"),
    pytest.param(25 * H, None, [], True, id="delete pending passed deadline"),
    pytest.param(1 * M, UNEXPIRED, [cond("Approved", 50 * M)], False,
                 id="no delete approved not passed deadline unexpired"),
    pytest.param(1 * M, EXPIRED, [cond("Approved", 50 * M)], True, id="delete approved not passed deadline expired"),
    pytest.param(1 * M, GARBAGE, [cond("Approved", 2 * H)], True, id="delete approved passed deadline unparseable"),
    # beyond upstream's table: conditions without a lastUpdateTime never age
    pytest.param(30 * H, None, [{"type": "Denied", "status": "True"}], False, id="denied without a timestamp"),
])
async def test_cleaner(created: float, certificate: str | None, conditions: list[dict[str, Any]],
                       deleted: bool) -> None:
    status: dict[str, Any] = {"conditions": conditions}
    if certificate is not None:
        status["certificate"] = certificate
    csr = {"metadata": {"name": "fake-csr", "creationTimestamp": ts(created), "resourceVersion": "1"},
           "status": status}
    assert (cleanup_reason(csr, NOW) is not None) == deleted
    controller, client = new_controller()
    controller.informer.store._put("fake-csr", csr)
    await controller.clean_once()
    assert client.deleted == (["fake-csr"] if deleted else [])


@dataclass
class DeleteRecorder:
    error: Exception | None = None
    deleted: list[str] = field(default_factory=list)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> dict[str, Any]:
        self.deleted.append(name)
        if self.error is not None:
            raise self.error
        return {}


def new_controller(client: DeleteRecorder | None = None) -> tuple[CSRCleanerController, DeleteRecorder]:
    client = client or DeleteRecorder()
    clock = FakeClock(NOW)
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return CSRCleanerController(ctx), client


async def test_failed_delete_does_not_stop_the_pass() -> None:
    client = DeleteRecorder(error=RuntimeError("boom"))
    controller, _ = new_controller(client)
    old = [{"metadata": {"name": n, "creationTimestamp": ts(25 * H), "resourceVersion": "1"}, "status": {}}
           for n in ("a", "b")]
    for obj in old:
        controller.informer.store._put(obj["metadata"]["name"], obj)
    await controller.clean_once()
    assert sorted(client.deleted) == ["a", "b"]
