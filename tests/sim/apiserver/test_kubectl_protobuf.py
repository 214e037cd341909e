"""The real kubectl's typed clients against kube-sim: ``kubectl create <kind>`` sends protobuf
(``application/vnd.kubernetes.protobuf``) and reads protobuf back. Every create subcommand for a kind kube-sim
serves, then get -o yaml, scale, a brief watch and delete.

kube-sim serves no ResourceQuota, Ingress or ServiceAccount token subresource, so ``kubectl create quota``,
``create ingress`` and ``create token`` are not covered here."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.sim.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401 - the fixture

CREATES = [
    (("deployment", "web", "--image=nginx", "--replicas=2"), "deployment.apps/web"),
    (("job", "once", "--image=busybox"), "job.batch/once"),
    (("cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *"), "cronjob.batch/tick"),
    (("namespace", "team"), "namespace/team"),
    (("configmap", "conf", "--from-literal=a=b"), "configmap/conf"),
    (("secret", "generic", "creds", "--from-literal=password=s3cr3t"), "secret/creds"),
    (("secret", "docker-registry", "pull", "--docker-username=u", "--docker-password=p",
      "--docker-server=registry.example.com"), "secret/pull"),
    (("service", "clusterip", "front", "--tcp=80:8080"), "service/front"),
    (("service", "nodeport", "node", "--tcp=80:8080"), "service/node"),
    (("service", "loadbalancer", "lb", "--tcp=443:8443"), "service/lb"),
    (("service", "externalname", "ext", "--external-name=db.example.com"), "service/ext"),
    (("serviceaccount", "robot"), "serviceaccount/robot"),
    (("role", "reader", "--verb=get,list", "--resource=pods"), "role.rbac.authorization.k8s.io/reader"),
    (("clusterrole", "viewer", "--verb=get", "--resource=nodes"), "clusterrole.rbac.authorization.k8s.io/viewer"),
    (("rolebinding", "read", "--role=reader", "--serviceaccount=default:robot"),
     "rolebinding.rbac.authorization.k8s.io/read"),
    (("clusterrolebinding", "view", "--clusterrole=viewer", "--user=alice"),
     "clusterrolebinding.rbac.authorization.k8s.io/view"),
    (("poddisruptionbudget", "budget", "--selector=app=web", "--min-available=1"), "poddisruptionbudget.policy/budget"),
    (("priorityclass", "urgent", "--value=1000", "--description=first"), "priorityclass.scheduling.k8s.io/urgent"),
]


def _tls_pair(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sim.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_every_create_subcommand(kubectl: Kubectl, tmp_path: Path) -> None:  # noqa: F811
    cert, key = _tls_pair(tmp_path)
    creates = [*CREATES, (("secret", "tls", "site", f"--cert={cert}", f"--key={key}"), "secret/site")]
    outputs = await asyncio.gather(*(kubectl("create", *args) for args, _ in creates))
    for (_, name), out in zip(creates, outputs, strict=True):
        assert out.strip() == f"{name} created"
    got = await kubectl("get", "deploy/web", "cronjob/tick", "secret/site", "svc/ext", "pdb/budget", "-o",
                        "jsonpath={range .items[*]}{.kind}:{.metadata.name} {end}")
    assert got.split() == ["Deployment:web", "CronJob:tick", "Secret:site", "Service:ext",
                           "PodDisruptionBudget:budget"]
    assert await kubectl("get", "secret", "creds", "-o", "jsonpath={.data.password}") == "czNjcjN0"
    assert await kubectl("get", "svc", "ext", "-o", "jsonpath={.spec.type} {.spec.externalName}") == \
        "ExternalName db.example.com"
    assert await kubectl("get", "priorityclass", "urgent", "-o", "jsonpath={.value} {.description}") == "1000 first"


async def test_the_wire_is_protobuf(kubectl: Kubectl) -> None:  # noqa: F811
    proc = await kubectl.start("create", "configmap", "wire", "--from-literal=k=v", "--v=8")
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    log = err.decode()
    assert "Content-Type: application/vnd.kubernetes.protobuf" in log  # the request body
    assert 'status="201 Created"' in log
    assert log.count("Content-Type: application/vnd.kubernetes.protobuf") == 2  # and the answer
    assert out.decode().strip() == "configmap/wire created"


async def test_yaml_scale_watch_delete(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("create", "deployment", "web", "--image=nginx", "--port=80")
    yaml = await kubectl("get", "deployment", "web", "-o", "yaml")
    assert "kind: Deployment" in yaml
    assert "- containerPort: 80" in yaml
    assert "image: nginx" in yaml
    watch = await kubectl.start("get", "deployment", "web", "-w", "--output-watch-events")
    assert watch.stdout is not None
    try:
        header = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert header.split()[:2] == [b"EVENT", b"NAME"]
        assert (await asyncio.wait_for(watch.stdout.readline(), 10)).split()[:2] == [b"ADDED", b"web"]
        assert "deployment.apps/web scaled" in await kubectl("scale", "deployment", "web", "--replicas=3")
        modified = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert modified.split()[:3] == [b"MODIFIED", b"web", b"0/3"]
    finally:
        watch.kill()
        await watch.wait()
    assert 'deployment.apps "web" deleted' in await kubectl("delete", "deployment", "web")
    assert await kubectl("get", "deployment", "-o", "name") == ""


@pytest.mark.parametrize("kind", ["quota", "ingress"])
async def test_create_kinds_sent_as_protobuf(kubectl: Kubectl, kind: str) -> None:  # noqa: F811
    args = ("quota", "q", "--hard=pods=2") if kind == "quota" else ("ingress", "i", "--rule=a.example.com/=svc:80")
    out = await kubectl("create", *args)
    assert out.strip() in ("resourcequota/q created", "ingress.networking.k8s.io/i created")
    assert await kubectl("get", kind, "-o", "name") in ("resourcequota/q\n", "ingress.networking.k8s.io/i\n")
