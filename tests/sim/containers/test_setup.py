"""What the simulated kubelet gives a container: environment and volumes, from the pod and the objects it names."""

from __future__ import annotations

import base64
from typing import Any

from controller_manager.api.resources import CONFIGMAPS, SECRETS, SERVICES, Resource
from controller_manager.sim.containers.filesystem import Tree
from controller_manager.sim.containers.setup import container_tree, environment, pod_volumes

Obj = dict[str, Any]


class View:
    def __init__(self, objects: dict[tuple[str, str], Obj]) -> None:
        self.objects = objects

    def get(self, res: Resource, namespace: str, name: str) -> Obj | None:
        obj = self.objects.get((res.plural, name))
        return obj if obj is not None and obj["metadata"].get("namespace", "default") == namespace else None

    def list(self, res: Resource, namespace: str) -> list[Obj]:
        return [o for (plural, _), o in self.objects.items() if plural == res.plural]

    def token(self, pod: Obj, audience: str | None, expiration_seconds: int) -> str | None:
        return f"token-for-{pod['metadata']['name']}-{audience}-{expiration_seconds}"


VIEW = View({
    (CONFIGMAPS.plural, "cfg"): {"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"},
                                 "binaryData": {"bin": base64.b64encode(b"\x00\x01").decode()}},
    (SECRETS.plural, "s"): {"metadata": {"name": "s"}, "data": {"pw": base64.b64encode(b"pw!").decode()}},
    (SERVICES.plural, "db-main"): {"metadata": {"name": "db-main"},
                                   "spec": {"clusterIP": "10.96.0.7", "ports": [{"port": 5432, "protocol": "TCP"}]}},
    (SERVICES.plural, "headless"): {"metadata": {"name": "headless"},
                                    "spec": {"clusterIP": "None", "ports": [{"port": 1}]}},
})


def test_environment_order_expansion_and_sources() -> None:
    container = {"name": "c", "resources": {"limits": {"memory": "1Gi", "cpu": "1500m"}},
                 "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                 "env": [{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)-$(MISSING)-$$(A)"},
                         {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                             "divisor": "1Mi"}}},
                         {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                         {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
                         {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [container]}}
    env = environment(pod, container, VIEW)
    assert env[:2] == [("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"), ("HOSTNAME", "p")]
    assert env[-1] == ("HOME", "/root")
    values = dict(env)
    assert values["B"] == "x-$(MISSING)-$(A)"
    assert (values["MEM"], values["CPU"], values["PW"], values["NS"]) == ("1024", "2", "pw!", "default")
    assert values["CFG_a"] == "1"
    assert values["DB_MAIN_SERVICE_HOST"] == "10.96.0.7"
    assert values["DB_MAIN_PORT_5432_TCP"] == "tcp://10.96.0.7:5432"
    assert not any(k.startswith("HEADLESS_") for k in values)
    pod["spec"]["enableServiceLinks"] = False
    assert "DB_MAIN_SERVICE_HOST" not in dict(environment(pod, container, VIEW))


def test_volumes_items_sub_paths_and_tokens() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {
        "volumes": [{"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "b", "path": "conf/b.txt"}]}},
                    {"name": "proj", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token", "audience": "vault", "expirationSeconds": 900}},
                        {"secret": {"name": "s"}}]}},
                    {"name": "missing", "configMap": {"name": "nope", "optional": True}},
                    {"name": "work", "emptyDir": {}}]}}
    volumes = pod_volumes(pod, VIEW, 0.0)
    container = {"name": "c", "volumeMounts": [
        {"name": "cfg", "mountPath": "/etc/cfg"}, {"name": "proj", "mountPath": "/var/run/proj"},
        {"name": "cfg", "mountPath": "/etc/only-b.txt", "subPath": "conf/b.txt"},
        {"name": "work", "mountPath": "/work/sub", "subPath": "deeper"}, {"name": "missing", "mountPath": "/m"}]}
    tree = container_tree(pod, container, volumes, ["sh"], 0.0)
    assert tree.read("/etc/cfg/conf/b.txt") == b"2"
    assert not tree.exists("/etc/cfg/a")
    assert tree.read("/var/run/proj/token") == b"token-for-p-vault-900"
    assert tree.read("/var/run/proj/pw") == b"pw!"
    assert tree.read("/etc/only-b.txt") == b"2"
    tree.write("/work/sub/f", b"x")
    assert Tree(volumes["work"]).read("/deeper/f") == b"x"  # a subPath mount is that directory of the volume
    assert list(Tree(volumes["missing"]).root.children) == []
