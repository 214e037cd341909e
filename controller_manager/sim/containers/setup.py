"""What the kubelet gives a container before its process runs: environment, volumes and its /etc files.

- Environment, in the order a container's process sees it: ``PATH`` (the image's), ``HOSTNAME``, the
  container's ``env`` (``value`` with ``$(VAR)`` expanded from earlier entries as the kubelet expands it;
  ``valueFrom`` ConfigMap/Secret keys, ``fieldRef`` and ``resourceFieldRef`` limits), ``envFrom``
  (ConfigMaps, Secrets, with ``prefix``), the service links of the namespace's Services and the
  ``kubernetes`` Service (unless ``enableServiceLinks: false``, which still keeps the latter), ``HOME``.
- Volumes: ``emptyDir`` (shared by the pod's containers), ``configMap``, ``secret``, ``downwardAPI`` and
  ``projected`` (ServiceAccount tokens minted for the pod, ConfigMaps, Secrets, downward API) with
  ``items``, ``optional`` and ``subPath`` mounts. Other volume types mount as empty directories.
- ``/etc/hostname``, ``/etc/hosts`` (the kubelet-managed file with the pod IP and hostAliases) and
  ``/etc/resolv.conf`` (ClusterFirst: the cluster DNS search path).
"""

from __future__ import annotations

import base64
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any, Protocol

from controller_manager.api.quantity import parse_quantity
from controller_manager.api.resources import CONFIGMAPS, SECRETS, SERVICES, Resource
from controller_manager.sim.containers.filesystem import Directory, File, Tree

__all__ = ["BIN_DIRECTORY", "ClusterView", "Setup", "container_tree", "environment", "pod_volumes"]

Obj = dict[str, Any]
IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BIN_DIRECTORY = "/bin"
CLUSTER_DOMAIN = "cluster.local"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


class ClusterView(Protocol):
    """What the kubelet reads from the API server to set a container up."""

    def get(self, res: Resource, namespace: str, name: str) -> Obj | None: ...
    def list(self, res: Resource, namespace: str) -> list[Obj]: ...
    def token(self, pod: Obj, audience: str | None, expiration_seconds: int) -> str | None: ...


@dataclass
class Setup:
    env: list[tuple[str, str]]
    tree: Tree


def _expand(value: str, env: Mapping[str, str]) -> str:
    """The kubelet's $(VAR) expansion: known names replaced, unknown ones left, ``$$`` an escaped ``$``."""
    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(sub, value)


def _field(pod: Obj, path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = sorted((meta.get(path.split(".")[1]) or {}).items())
        return "\n".join(f'{k}="{v}"' for k, v in items)
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": status.get("hostIP"),
              "status.podIP": status.get("podIP"),
              "status.podIPs": ",".join(i.get("ip", "") for i in status.get("podIPs") or []),
              "status.hostIPs": ",".join(i.get("ip", "") for i in status.get("hostIPs") or [])}
    return str(simple.get(path) or "")


def _resource_field(container: Obj, ref: Mapping[str, Any]) -> str:
    """resourceFieldRef: a limit (or request) in units of ``divisor``, rounded up as the kubelet does."""
    resource = str(ref.get("resource") or "")
    kind, _, name = resource.partition(".")
    amounts = (container.get("resources") or {}).get("limits" if kind == "limits" else "requests") or {}
    value = amounts.get(name)
    if value is None:
        return "0"
    divisor = parse_quantity(ref.get("divisor") or "1")
    if divisor == 0:
        divisor = Decimal(1)
    return str(int((parse_quantity(value) / divisor).to_integral_value(ROUND_CEILING)))


def _data(obj: Obj | None, *, secret: bool) -> dict[str, bytes]:
    if obj is None:
        return {}
    out = {k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()} if secret else {}
    if secret:
        out.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
    else:
        out.update({k: str(v).encode() for k, v in (obj.get("data") or {}).items()})
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def _service_links(services: list[Obj]) -> list[tuple[str, str]]:
    """The Docker-links style variables the kubelet makes for each Service with a cluster IP."""
    out: list[tuple[str, str]] = []
    for svc in services:
        spec = svc.get("spec") or {}
        ip = spec.get("clusterIP")
        ports = spec.get("ports") or []
        if not ip or ip == "None" or not ports:
            continue
        prefix = str(svc["metadata"]["name"]).upper().replace("-", "_")
        first = ports[0]
        out.append((f"{prefix}_SERVICE_HOST", ip))
        out.append((f"{prefix}_SERVICE_PORT", str(first.get("port"))))
        for p in ports:
            if p.get("name"):
                out.append((f"{prefix}_SERVICE_PORT_{str(p['name']).upper().replace('-', '_')}", str(p.get("port"))))
        proto = str(first.get("protocol") or "TCP")
        out.append((f"{prefix}_PORT", f"{proto.lower()}://{ip}:{first.get('port')}"))
        for p in ports:
            proto = str(p.get("protocol") or "TCP")
            base = f"{prefix}_PORT_{p.get('port')}_{proto.upper()}"
            out.append((base, f"{proto.lower()}://{ip}:{p.get('port')}"))
            out.append((f"{base}_PROTO", proto.lower()))
            out.append((f"{base}_PORT", str(p.get("port"))))
            out.append((f"{base}_ADDR", ip))
    return out


def environment(pod: Obj, container: Obj, view: ClusterView) -> list[tuple[str, str]]:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    ns = str(meta.get("namespace") or "default")
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for key, res in (("configMapRef", CONFIGMAPS), ("secretRef", SECRETS)):
            ref = source.get(key)
            if ref:
                values = _data(view.get(res, ns, str(ref.get("name"))), secret=res is SECRETS)
                env.update({prefix + k: v.decode(errors="replace") for k, v in values.items()})
    for var in container.get("env") or []:
        name = str(var.get("name"))
        source = var.get("valueFrom")
        if source is None:
            env[name] = _expand(str(var.get("value") or ""), env)
        elif "fieldRef" in source:
            env[name] = _field(pod, str(source["fieldRef"].get("fieldPath")))
        elif "resourceFieldRef" in source:
            env[name] = _resource_field(container, source["resourceFieldRef"])
        else:
            for key, res in (("configMapKeyRef", CONFIGMAPS), ("secretKeyRef", SECRETS)):
                ref = source.get(key)
                if ref:
                    values = _data(view.get(res, ns, str(ref.get("name"))), secret=res is SECRETS)
                    if str(ref.get("key")) in values:
                        env[name] = values[str(ref["key"])].decode(errors="replace")
    # The master service's variables are always set; the namespace's only with service links on.
    services = view.list(SERVICES, ns) if spec.get("enableServiceLinks", True) is not False else []
    if ns != "default" or not services:
        services = [s for s in services if s["metadata"]["name"] != "kubernetes"]
        kubernetes = view.get(SERVICES, "default", "kubernetes")
        if kubernetes is not None:
            services.append(kubernetes)
    links = [(k, v) for k, v in _service_links(services) if k not in env]
    hostname = str(spec.get("hostname") or meta.get("name"))
    return [("PATH", IMAGE_PATH), ("HOSTNAME", hostname), *env.items(), *links, ("HOME", "/root")]


def _projected_file(files: dict[str, bytes], items: list[Obj] | None, path_key: str = "path") -> dict[str, bytes]:
    if not items:
        return files
    return {str(i[path_key]): files[str(i["key"])] for i in items if str(i.get("key")) in files}


def _volume_files(pod: Obj, volume: Obj, view: ClusterView) -> dict[str, bytes] | None:
    """The files a projected-kind volume holds (path -> content), or None for a plain directory."""
    ns = str(pod["metadata"].get("namespace") or "default")
    if "configMap" in volume:
        src = volume["configMap"]
        return _projected_file(_data(view.get(CONFIGMAPS, ns, str(src.get("name"))), secret=False), src.get("items"))
    if "secret" in volume:
        src = volume["secret"]
        name = src.get("secretName") or src.get("name")  # (a projected source names it "name")
        return _projected_file(_data(view.get(SECRETS, ns, str(name)), secret=True),
                               src.get("items"))
    if "downwardAPI" in volume:
        return {str(i["path"]): _field(pod, str((i.get("fieldRef") or {}).get("fieldPath"))).encode()
                for i in volume["downwardAPI"].get("items") or [] if "fieldRef" in i}
    if "projected" in volume:
        files: dict[str, bytes] = {}
        for source in volume["projected"].get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                token = view.token(pod, sat.get("audience"), int(sat.get("expirationSeconds") or 3600))
                if token is not None:
                    files[str(sat.get("path") or "token")] = token.encode()
            else:
                files.update(_volume_files(pod, source, view) or {})
        return files
    return None


def pod_volumes(pod: Obj, view: ClusterView, now: float) -> dict[str, Directory]:
    """Each of the pod's volumes as a directory, made once per pod and shared by its containers."""
    out: dict[str, Directory] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        files = _volume_files(pod, volume, view)
        directory = Directory(mtime=now, mode=0o777 if files is None else 0o755)
        tree = Tree(directory, now=now)
        for path, data in sorted((files or {}).items()):
            parent = posixpath.dirname(path)
            if parent:
                tree.mkdir("/" + parent, parents=True)
            tree.write("/" + path, data)
        directory.read_only = files is not None  # filled: from now on only the kubelet could change it
        out[str(volume.get("name"))] = directory
    return out


def _hosts(pod: Obj) -> bytes:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    hostname = str(spec.get("hostname") or meta.get("name"))
    lines = ["# Kubernetes-managed hosts file.", "127.0.0.1\tlocalhost",
             "::1\tlocalhost ip6-localhost ip6-loopback", "fe00::0\tip6-localnet", "fe00::0\tip6-mcastprefix",
             "fe00::1\tip6-allnodes", "fe00::2\tip6-allrouters"]
    pod_ip = status.get("podIP")
    if pod_ip and not spec.get("hostNetwork"):
        if spec.get("subdomain"):
            fqdn = f"{hostname}.{spec['subdomain']}.{meta.get('namespace')}.svc.{CLUSTER_DOMAIN}"
            lines.append(f"{pod_ip}\t{fqdn}\t{hostname}")
        else:
            lines.append(f"{pod_ip}\t{hostname}")
    aliases = spec.get("hostAliases") or []
    if aliases:
        lines.append("")
        lines.append("# Entries added by HostAliases.")
        lines.extend(f"{a.get('ip')}\t{chr(9).join(a.get('hostnames') or [])}" for a in aliases)
    return ("\n".join(lines) + "\n").encode()


def _resolv_conf(pod: Obj, nameserver: str) -> bytes:
    ns = str(pod["metadata"].get("namespace") or "default")
    search = f"{ns}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}"
    return f"search {search}\nnameserver {nameserver}\noptions ndots:5\n".encode()


def container_tree(pod: Obj, container: Obj, volumes: Mapping[str, Directory], commands: list[str],
                   now: float, nameserver: str = "10.96.0.10") -> Tree:
    """The container's file tree: a small image layout, the kubelet's /etc files, then its volume mounts."""
    tree = Tree(now=now)
    for path in ("/bin", "/dev", "/etc", "/home", "/proc", "/root", "/run", "/sys", "/tmp", "/usr/bin",
                 "/usr/local/bin", "/usr/sbin", "/var/log", "/var/run"):
        tree.mkdir(path, parents=True)
    tmp = tree.lookup("/tmp")
    assert isinstance(tmp, Directory)
    tmp.mode = 0o1777
    for name in commands:
        tree.write(f"{BIN_DIRECTORY}/{name}", b"", mode=0o755)
    spec = pod.get("spec") or {}
    tree.write("/etc/hostname", (str(spec.get("hostname") or pod["metadata"]["name"]) + "\n").encode())
    tree.write("/etc/hosts", _hosts(pod))
    tree.write("/etc/resolv.conf", _resolv_conf(pod, nameserver))
    tree.write("/etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")
    tree.write("/etc/group", b"root:x:0:\nnobody:x:65534:\n")
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(str(mount.get("name")))
        if volume is None:
            continue
        sub_path = str(mount.get("subPath") or "")
        if sub_path:
            node = Tree(volume).lookup("/" + sub_path) if Tree(volume).exists("/" + sub_path) else None
            if isinstance(node, File):
                tree.mkdir(posixpath.dirname(str(mount["mountPath"])) or "/", parents=True)
                tree.write(str(mount["mountPath"]), node.data, mode=node.mode)
                continue
            if node is None:  # the kubelet makes a missing subPath directory
                node = Directory(mtime=now)
                if not volume.read_only:
                    Tree(volume).mount("/" + sub_path, node)
            assert isinstance(node, Directory)
            volume = node
        if mount.get("readOnly") and not volume.read_only:
            volume = Directory(volume.children, volume.mode, volume.mtime, read_only=True)
        tree.mount(str(mount["mountPath"]), volume)
    return tree

