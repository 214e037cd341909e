"""networking.k8s.io, storage.k8s.io, PersistentVolumes and CertificateSigningRequests through the API, and the
kubectl commands that use them (create ingress, certificate approve)."""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401
from tests.sim.apiserver.test_official_client import ca_pem

NET = "/apis/networking.k8s.io/v1"
STORAGE = "/apis/storage.k8s.io/v1"
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
PVS = "/api/v1/persistentvolumes"
PVCS = "/api/v1/namespaces/default/persistentvolumeclaims"
BACKEND = {"service": {"name": "web", "port": {"number": 80}}}


def csr_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])).sign(key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM).decode()


def csr(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "request": base64.b64encode(csr_pem().encode()).decode(), "signerName": "example.com/signer",
        "usages": ["client auth"], **spec}}


# --- networking ---------------------------------------------------------------------------------------------

async def test_ingress_validation_and_status(client: Client) -> None:
    path = f"{NET}/namespaces/default/ingresses"
    status, body = await client.post(path, {"metadata": {"name": "empty"}, "spec": {}})
    assert status == 422
    assert body["message"] == ('Ingress.networking.k8s.io "empty" is invalid: spec: Invalid value: '
                               'null: either `defaultBackend` or `rules` must be specified')
    status, body = await client.post(path, {"metadata": {"name": "bad"}, "spec": {"rules": [{"http": {"paths": [
        {"path": "foo", "pathType": "Prefix", "backend": BACKEND}, {"path": "/", "backend": BACKEND}]}}]}})
    assert status == 422
    assert [c["message"] for c in body["details"]["causes"]] == [
        'Invalid value: "foo": must be an absolute path', "Required value: pathType must be specified"]
    status, ing = await client.post(path, {"metadata": {"name": "ok"}, "spec": {"rules": [{"host": "a.example.com",
        "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": BACKEND}]}}]}})
    assert status == 201, ing
    ing["status"] = {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}}
    status, ing = await client.put(f"{path}/ok/status", ing)
    assert status == 200
    assert ing["status"]["loadBalancer"]["ingress"] == [{"ip": "10.0.0.9"}]


async def test_default_ingress_class(client: Client) -> None:
    status, _ = await client.post(f"{NET}/ingressclasses", {
        "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
        "spec": {"controller": "k8s.io/ingress-nginx"}})
    assert status == 201
    status, ing = await client.post(f"{NET}/namespaces/default/ingresses", {
        "metadata": {"name": "i"}, "spec": {"defaultBackend": BACKEND}})
    assert status == 201, ing
    assert ing["spec"]["ingressClassName"] == "nginx"
    status, body = await client.post(f"{NET}/ingressclasses", {"metadata": {"name": "x"}, "spec": {}})
    assert status == 422
    assert body["message"] == 'IngressClass.networking.k8s.io "x" is invalid: spec.controller: Required value'


async def test_network_policy_defaults(client: Client) -> None:
    status, np = await client.post(f"{NET}/namespaces/default/networkpolicies", {
        "metadata": {"name": "np"}, "spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}})
    assert status == 201, np
    assert np["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert np["spec"]["egress"][0]["ports"] == [{"protocol": "TCP", "port": 53}]


# --- storage ------------------------------------------------------------------------------------------------

async def test_storage_class_defaults_immutability_and_default_class(client: Client) -> None:
    status, sc = await client.post(f"{STORAGE}/storageclasses", {
        "metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/disk", "parameters": {"type": "ssd"}})
    assert status == 201, sc
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    sc["parameters"] = {"type": "hdd"}
    status, body = await client.put(f"{STORAGE}/storageclasses/fast", sc)
    assert status == 422
    assert "parameters: Forbidden: updates to parameters are forbidden." in body["message"]
    status, pvc = await client.post(PVCS, {"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    assert status == 201, pvc
    assert pvc["spec"]["storageClassName"] == "fast"
    status, pvc = await client.post(PVCS, {"metadata": {"name": "none"}, "spec": {
        "storageClassName": "", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    assert pvc["spec"]["storageClassName"] == ""


async def test_pvc_validation(client: Client) -> None:
    status, body = await client.post(PVCS, {"metadata": {"name": "bad"}, "spec": {}})
    assert status == 422
    assert body["message"] == ('PersistentVolumeClaim "bad" is invalid: [spec.accessModes: Required value: at least 1 '
                               'access mode is required, spec.resources[storage]: Required value]')
    status, _ = await client.post(f"{STORAGE}/storageclasses", {"metadata": {"name": "expandable"},
                                                                 "provisioner": "example.com/disk",
                                                                 "allowVolumeExpansion": True})
    assert status == 201
    status, pvc = await client.post(PVCS, {"metadata": {"name": "ok"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "expandable",
        "resources": {"requests": {"storage": "1Gi"}}}})
    status, pvc = await client.put(f"{PVCS}/ok/status", {**pvc, "status": {"phase": "Bound"}})
    assert status == 200, pvc
    pvc["spec"]["resources"]["requests"]["storage"] = "2Gi"
    status, pvc = await client.put(f"{PVCS}/ok", pvc)
    assert status == 200, pvc
    # PersistentVolumeClaimResize: a claim of a class that does not allow expansion may not grow.
    status, fixed = await client.post(PVCS, {"metadata": {"name": "fixed"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "none", "resources": {"requests": {"storage": "1Gi"}}}})
    fixed["spec"]["resources"]["requests"]["storage"] = "2Gi"
    status, body = await client.put(f"{PVCS}/fixed", fixed)
    assert status == 403
    assert body["message"] == ('persistentvolumeclaims "fixed" is forbidden: only dynamically provisioned pvc can be '
                               'resized and the storageclass that provisions the pvc must support resize')
    pvc["spec"]["accessModes"] = ["ReadWriteMany"]
    status, body = await client.put(f"{PVCS}/ok", pvc)
    assert status == 422
    assert "spec: Forbidden: spec is immutable after creation" in body["message"]


async def test_persistent_volume(client: Client) -> None:
    status, pv = await client.post(PVS, {"metadata": {"name": "pv1"}, "spec": {
        "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"}}})
    assert status == 201, pv
    assert "namespace" not in pv["metadata"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["status"]["phase"] == "Pending"
    assert pv["status"]["lastPhaseTransitionTime"]
    pv["status"] = {"phase": "Available"}
    status, pv = await client.put(f"{PVS}/pv1/status", pv)
    assert status == 200
    assert pv["status"]["phase"] == "Available"
    assert pv["status"]["lastPhaseTransitionTime"]
    status, body = await client.post(PVS, {"metadata": {"name": "pv2"}, "spec": {
        "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"]}})
    assert status == 422
    assert body["message"] == 'PersistentVolume "pv2" is invalid: spec: Required value: must specify a volume type'


async def test_csi_kinds_and_volume_attachment(client: Client) -> None:
    status, driver = await client.post(f"{STORAGE}/csidrivers", {"metadata": {"name": "disk.example.com"},
                                                                 "spec": {}})
    assert status == 201, driver
    assert driver["spec"]["attachRequired"] is True
    assert driver["spec"]["volumeLifecycleModes"] == ["Persistent"]
    assert driver["spec"]["fsGroupPolicy"] == "ReadWriteOnceWithFSType"
    status, body = await client.post(f"{STORAGE}/csinodes", {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "a", "nodeID": "x"}, {"name": "a", "nodeID": "y"}]}})
    assert status == 422
    assert body["message"] == 'CSINode.storage.k8s.io "n1" is invalid: spec.drivers[1].name: Duplicate value: "a"'
    va_path = f"{STORAGE}/volumeattachments"
    status, va = await client.post(va_path, {"metadata": {"name": "va"}, "spec": {
        "attacher": "disk.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}})
    assert status == 201, va
    va["status"] = {"attached": True}
    status, va = await client.put(f"{va_path}/va/status", va)
    assert status == 200
    assert va["status"]["attached"] is True
    va["spec"]["nodeName"] = "n2"
    status, body = await client.put(f"{va_path}/va", va)
    assert status == 422
    status, body = await client.post(va_path, {"metadata": {"name": "bad"}, "spec": {"source": {}}})
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.attacher", "spec.nodeName", "spec.source"]


# --- certificates ---------------------------------------------------------------------------------------------

async def test_csr_approval_and_status(client: Client) -> None:
    status, obj = await client.post(CSRS, csr("alice", username="mallory", groups=["system:masters"]))
    assert status == 201, obj
    assert obj["status"] == {}
    assert (obj["spec"]["username"], obj["spec"]["uid"]) == ("admin", "admin-uid")  # the requester, not the body
    assert obj["spec"]["groups"] == ["system:masters", "system:authenticated"]
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Mine"}]}
    status, same = await client.put(f"{CSRS}/alice/status", obj)
    assert status == 200
    assert "conditions" not in same["status"]  # approval only through /approval
    status, approved = await client.put(f"{CSRS}/alice/approval", obj)
    assert status == 200, approved
    condition = approved["status"]["conditions"][0]
    assert condition["type"] == "Approved"
    assert condition["lastUpdateTime"]
    assert condition["lastTransitionTime"]
    approved["status"]["certificate"] = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    status, issued = await client.put(f"{CSRS}/alice/status", approved)
    assert status == 200
    assert issued["status"]["certificate"]
    assert issued["status"]["conditions"][0]["type"] == "Approved"
    issued["status"]["conditions"].append({"type": "Denied", "status": "True"})
    status, body = await client.put(f"{CSRS}/alice/approval", issued)
    assert status == 422
    assert "Approved and Denied conditions are mutually exclusive" in body["message"]


async def test_csr_validation(client: Client) -> None:
    status, body = await client.post(CSRS, csr("bad", signerName="nope", expirationSeconds=60))
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.signerName", "spec.expirationSeconds"]
    status, body = await client.post(CSRS, {"metadata": {"name": "junk"}, "spec": {
        "request": base64.b64encode(b"hi").decode(), "signerName": "example.com/s", "usages": ["client auth"]}})
    assert status == 422
    assert body["message"] == ('CertificateSigningRequest.certificates.k8s.io "junk" is invalid: spec.request: Invalid '
                               'value: "aGk=": PEM block type must be CERTIFICATE REQUEST')


# --- kubectl ----------------------------------------------------------------------------------------------------

async def test_kubectl_create_ingress(kubectl: Kubectl) -> None:  # noqa: F811
    out = await kubectl("create", "ingress", "simple", "--rule=foo.com/bar=svc1:8080,tls=my-cert")
    assert out.strip() == "ingress.networking.k8s.io/simple created"
    got = json.loads(await kubectl("get", "ing", "simple", "-o", "json"))
    assert got["spec"]["rules"] == [{"host": "foo.com", "http": {"paths": [
        {"path": "/bar", "pathType": "Exact", "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}]
    assert got["spec"]["tls"] == [{"hosts": ["foo.com"], "secretName": "my-cert"}]


async def test_kubectl_certificate_approve(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "certificates.k8s.io/v1",
                                                        "kind": "CertificateSigningRequest", **csr("alice")}))
    out = await kubectl("certificate", "approve", "alice")
    assert out.strip() == "certificatesigningrequest.certificates.k8s.io/alice approved"
    got = json.loads(await kubectl("get", "csr", "alice", "-o", "json"))
    assert got["status"]["conditions"][0]["type"] == "Approved"
    assert got["status"]["conditions"][0]["reason"] == "KubectlApprove"


async def test_kubectl_get_storage_and_network_kinds(kubectl: Kubectl) -> None:  # noqa: F811
    for kind in ("pv", "sc", "csidrivers", "csinodes", "volumeattachments", "ingressclasses", "netpol", "csr",
                 "quota", "limits", "rc", "hpa"):
        await kubectl("get", kind)


# --- ServiceCIDRs and IPAddresses -------------------------------------------------------------------------------

async def test_default_service_cidr(client: Client) -> None:
    status, got = await client.get(f"{NET}/servicecidrs/kubernetes")
    assert status == 200
    assert got["spec"] == {"cidrs": ["10.96.0.0/12"]}
    (ready,) = got["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == (
        "Ready", "True", "", "Kubernetes default Service CIDR is ready")
    got["spec"]["cidrs"] = ["10.100.0.0/16"]
    status, body = await client.put(f"{NET}/servicecidrs/kubernetes", got)
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "10.100.0.0/16": field is immutable',
         "field": "spec.cidrs[0]"}]


async def test_service_cidr_validation_and_status(client: Client) -> None:
    path = f"{NET}/servicecidrs"
    cases = {
        "none": ([], [("spec.cidrs", "Required value: at least one CIDR required")]),
        "bad": (["10.0.0.0/33", "10.1.0.1/16", "010.2.0.0/16"], [
            ("spec.cidrs", 'Invalid value: {"CIDRs":["10.0.0.0/33","10.1.0.1/16",'
                           '"010.2.0.0/16"]}: may only hold up to 2 values')]),
        "forms": (["10.0.0.0/33", "10.1.0.1/16"], [
            ("spec.cidrs[0]", 'Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. 10.9.8.0/24 or '
                              "2001:db8::/64)"),
            ("spec.cidrs[1]", 'Invalid value: "10.1.0.1/16": must not have bits set beyond the prefix length'),
            ("spec.cidrs", 'Invalid value: {"CIDRs":["10.0.0.0/33","10.1.0.1/16"]}: '
                           "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and "
                           "2001:db8::/64")]),
        "canonical": (["2001:DB8::/64"], [
            ("spec.cidrs[0]", 'Invalid value: "2001:DB8::/64": must be in canonical form ("2001:db8::/64")')]),
    }
    for name, (cidrs, want) in cases.items():
        status, body = await client.post(path, {"metadata": {"name": name}, "spec": {"cidrs": cidrs}})
        assert status == 422, name
        assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == want, name
    status, got = await client.post(path, {"metadata": {"name": "extra"}, "spec": {"cidrs": ["10.200.0.0/24"]},
                                           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert status == 201, got
    assert got.get("status", {}) == {}  # a create starts without status
    got["spec"]["cidrs"] = ["10.200.0.0/24", "fd00::/108"]  # a single-stack range may gain the other family
    status, got = await client.put(f"{path}/extra", got)
    assert status == 200, got
    assert got["spec"]["cidrs"] == ["10.200.0.0/24", "fd00::/108"]


async def test_ip_addresses_follow_cluster_ips(client: Client) -> None:
    services = "/api/v1/namespaces/default/services"
    status, svc = await client.post(services, {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    assert status == 201, svc
    ip = svc["spec"]["clusterIP"]
    status, got = await client.get(f"{NET}/ipaddresses/{ip}")
    assert status == 200
    assert got["metadata"]["labels"] == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                         "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}
    assert got["spec"] == {"parentRef": {"resource": "services", "namespace": "default", "name": "web"}}
    status, headless = await client.post(services, {"metadata": {"name": "headless"}, "spec": {
        "clusterIP": "None", "ports": [{"port": 80}]}})
    assert status == 201, headless
    _, listed = await client.get(f"{NET}/ipaddresses")
    assert [i["metadata"]["name"] for i in listed["items"]] == [ip]
    # an address someone else holds is not handed out, nor may it be asked for
    status, taken = await client.post(f"{NET}/ipaddresses", {"metadata": {"name": "10.96.0.200"}, "spec": {
        "parentRef": {"resource": "gateways", "group": "example.com", "name": "gw"}}})
    assert status == 201, taken
    status, body = await client.post(services, {"metadata": {"name": "asks"}, "spec": {
        "clusterIP": "10.96.0.200", "ports": [{"port": 80}]}})
    assert status == 422
    assert "provided IP is already allocated" in body["message"]
    status, _ = await client.delete(f"{services}/web")
    assert status == 200
    status, _ = await client.get(f"{NET}/ipaddresses/{ip}")
    assert status == 404
    status, _ = await client.get(f"{NET}/ipaddresses/10.96.0.200")
    assert status == 200


async def test_ip_address_validation(client: Client) -> None:
    path = f"{NET}/ipaddresses"
    status, body = await client.post(path, {"metadata": {"name": "10.0.0.010"}, "spec": {}})
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("metadata.name", 'Invalid value: "10.0.0.010": ParseAddr("10.0.0.010"): unable to parse IP'),
        ("spec.parentRef", "Required value")]
    status, body = await client.post(path, {"metadata": {"name": "fd00:0::1"}, "spec": {"parentRef": {}}})
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("metadata.name", 'Invalid value: "fd00:0::1": must be a canonical format IP address'),
        ("spec.parentRef.resource", "Required value"), ("spec.parentRef.name", "Required value")]
    status, got = await client.post(path, {"metadata": {"name": "fd00::1"}, "spec": {"parentRef": {
        "resource": "services", "namespace": "default", "name": "a"}}})
    assert status == 201, got
    got["spec"]["parentRef"]["name"] = "b"
    status, body = await client.put(f"{path}/fd00::1", got)
    assert status == 422
    assert body["details"]["causes"][0]["message"] == (
        'Invalid value: {"Group":"","Resource":"services","Namespace":"default","Name":"b"}: '
        "field is immutable")


async def test_kubectl_get_service_cidrs_and_ip_addresses(kubectl: Kubectl) -> None:  # noqa: F811
    out = await kubectl("get", "servicecidrs", "-o", "name")
    assert out == "servicecidr.networking.k8s.io/kubernetes\n"
    await kubectl("create", "service", "clusterip", "web", "--tcp=80:80")
    svc = json.loads(await kubectl("get", "svc", "web", "-o", "json"))
    out = await kubectl("get", "ip", "-o", "name")
    assert out == f"ipaddress.networking.k8s.io/{svc['spec']['clusterIP']}\n"


# --- ClusterTrustBundles ----------------------------------------------------------------------------------------

async def test_cluster_trust_bundles(client: Client) -> None:
    path = "/apis/certificates.k8s.io/v1/clustertrustbundles"
    root = ca_pem()
    status, got = await client.post(path, {"metadata": {"name": "example.com:signer:one"}, "spec": {
        "signerName": "example.com/signer", "trustBundle": root}})
    assert status == 201, got
    assert got["spec"] == {"signerName": "example.com/signer", "trustBundle": root}
    got["spec"]["signerName"] = "example.com/other"
    status, body = await client.put(f"{path}/example.com:signer:one", got)
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("metadata.name", 'Invalid value: "example.com:signer:one": ClusterTrustBundle for signerName '
                          "example.com/other must be named with prefix example.com:other:"),
        ("spec.signerName", 'Invalid value: "example.com/other": changing signerName is forbidden')]
    cases = {
        "a:b": ("", root, [("metadata.name", 'Invalid value: "a:b": ClusterTrustBundle without signer name must not '
                                             'have ":" in its name')]),
        "empty": ("", "", [("spec.trustBundle", 'Invalid value: "<value omitted>": at least one trust anchor must '
                                                "be provided")]),
        "leaf": ("", ca_pem(ca=False), [("spec.trustBundle", 'Invalid value: "<value omitted>": entry 0 does not '
                                                              "have the CA bit set")]),
        "twice": ("", root + root, [("spec.trustBundle", 'Invalid value: "<value omitted>": duplicate trust anchor '
                                                         "(indices [0 1])")]),
        "key": ("", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                [("spec.trustBundle", 'Invalid value: "<value omitted>": entry 0 has bad block type: PRIVATE KEY')]),
    }
    for name, (signer, bundle, want) in cases.items():
        status, body = await client.post(path, {"metadata": {"name": name}, "spec": {
            "signerName": signer, "trustBundle": bundle}})
        assert status == 422, name
        assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == want, name


async def test_kubectl_get_cluster_trust_bundles(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle", "metadata": {"name": "roots"},
        "spec": {"trustBundle": ca_pem()}}))
    assert await kubectl("get", "clustertrustbundles", "-o", "name") == (
        "clustertrustbundle.certificates.k8s.io/roots\n")


# --- PodCertificateRequests ------------------------------------------------------------------------------------

def pod_certificate_request(name: str, **spec: Any) -> dict[str, Any]:
    base = {"signerName": "example.com/pods", "podName": "web-0", "podUID": "pod-uid", "serviceAccountName": "default",
            "serviceAccountUID": "sa-uid", "nodeName": "node-1", "nodeUID": "node-uid", "maxExpirationSeconds": 86400,
            "stubPKCS10Request": "AAAA"}
    return {"metadata": {"name": name}, "spec": {**base, **spec}}


async def test_pod_certificate_requests(client: Client) -> None:
    path = "/apis/certificates.k8s.io/v1/namespaces/default/podcertificaterequests"
    status, got = await client.post(path, pod_certificate_request("web-0-cert"))
    assert status == 201, got
    # The spec never changes after create.
    got["spec"]["nodeName"] = "node-2"
    status, body = await client.put(f"{path}/web-0-cert", got)
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["spec"]
    assert body["details"]["causes"][0]["message"].endswith("field is immutable")

    cases = {
        "no-uids": ({"podUID": "", "nodeUID": ""}, [("spec.podUID", 'Invalid value: "": must not be empty'),
                                                    ("spec.nodeUID", 'Invalid value: "": must not be empty')]),
        "no-expiry": ({"maxExpirationSeconds": None},
                      [("spec.maxExpirationSeconds", "Required value: must be set")]),
        "kube-signer": ({"signerName": "kubernetes.io/kube-apiserver-client-pod", "maxExpirationSeconds": 86401},
                        [("spec.maxExpirationSeconds", "Invalid value: 86401: must be in the range [3600, 86400]")]),
        "short": ({"maxExpirationSeconds": 60},
                  [("spec.maxExpirationSeconds", "Invalid value: 60: must be in the range [3600, 7862400]")]),
    }
    for name, (spec, want) in cases.items():
        status, body = await client.post(path, pod_certificate_request(name, **spec))
        assert status == 422, name
        assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == want, name

    # /status: one terminal condition, True; once denied, the status is frozen.
    denied = {"type": "Denied", "status": "True", "reason": "Policy", "message": "no",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}
    _, current = await client.get(f"{path}/web-0-cert")
    both = {**current, "status": {"conditions": [denied, {**denied, "type": "Failed"}]}}
    status, body = await client.put(f"{path}/web-0-cert/status", both)
    assert status == 422
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == [
        ("status.conditions[1].type",
         'Invalid value: "Failed": There may be at most one condition with type "Issued", "Denied", or "Failed"')]
    status, body = await client.put(f"{path}/web-0-cert/status", {**current, "status": {"conditions": [denied]}})
    assert status == 200, body
    status, body = await client.put(f"{path}/web-0-cert/status", {**body, "status": {"conditions": [
        {**denied, "message": "changed my mind"}]}})
    assert status == 422
    assert body["details"]["causes"][0]["message"].endswith(
        "immutable after PodCertificateRequest is issued, denied, or failed")
