"""The container runtime behind kube-sim's kubelets, as far as streaming needs one: exec, attach, port-forward.

Each running container (by the containerID its status shows) gets, on first use, a file tree and environment
built from its pod (:mod:`setup`); a restarted container gets a fresh one, volumes excepted, as a real
container starts again from its image. What a request finds is the kubelet's and containerd's:

- a container that is not running: ``container not found ("<name>")`` (the kubelet's words, which the API
  server passes on as ``unable to upgrade connection: ...``);
- exec of a command that cannot start: runc's ``exec: "foo": executable file not found in $PATH`` within
  containerd's ``failed to exec in container: failed to start exec "<id>": OCI runtime exec failed: ...``;
- port-forward to a port nothing listens on (one no container of the pod declares): containerd's
  ``failed to execute portforward in network namespace ...: connection refused``. A declared TCP port
  answers HTTP: ``200`` with the pod, container and port.
- attach joins the container's main process: a container whose command is ``sh`` or ``cat`` (with
  ``stdin: true``) reads what the client types, and when it ends (``exit``, end of input) the kubelet is told
  (:attr:`ContainerRuntime.on_main_exit`) and the pod's containers exit with its code, so ``kubectl run -i
  --rm`` ends as on a cluster; otherwise there is nothing to read and no output, as for a quiet process, until
  the container stops or the client leaves.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import PODS
from controller_manager.sim.containers import shell
from controller_manager.sim.containers.filesystem import Directory, Tree
from controller_manager.sim.containers.setup import ClusterView, container_tree, environment, pod_volumes

__all__ = ["ContainerNotFound", "ContainerRuntime", "SimContainer"]

Obj = dict[str, Any]
_STOP_POLL = 0.5


class ContainerNotFound(Exception):
    """The kubelet has no running container by that name in the pod."""

    def __init__(self, container: str) -> None:
        super().__init__(f'container not found ("{container}")')


def sandbox_id(pod: Obj) -> str:
    return hashlib.sha256(f"sandbox/{pod['metadata'].get('uid')}".encode()).hexdigest()


def _running_status(pod: Obj, name: str) -> Obj | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == name and "running" in (cs.get("state") or {}):
                return dict(cs)
    return None


def _spec_of(pod: Obj, name: str) -> Obj | None:
    spec = pod.get("spec") or {}
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if c.get("name") == name:
                return dict(c)
    return None


def _ids(pod: Obj, container: Obj) -> tuple[int, int]:
    pod_ctx = (pod.get("spec") or {}).get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    uid = ctx.get("runAsUser", pod_ctx.get("runAsUser", 0))
    gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup", 0))
    return int(uid or 0), int(gid or 0)


@dataclass
class SimContainer:
    name: str
    container_id: str
    spec: Obj
    tree: Tree
    env: list[tuple[str, str]]
    uid: int
    gid: int

    def process(self, stdin: shell.Input, out: shell.Writer, err: shell.Writer, tty: bool) -> shell.Process:
        workdir = str(self.spec.get("workingDir") or "/")
        if not self.tree.exists(workdir):
            self.tree.mkdir(workdir, parents=True)
        return shell.Process(self.tree, dict(self.env), stdin, out, err, cwd=workdir, tty=tty, uid=self.uid,
                             gid=self.gid)


@dataclass
class _PodState:
    uid: str
    volumes: dict[str, Directory]
    containers: dict[str, SimContainer] = field(default_factory=dict)


class ContainerRuntime:
    """Containers of every simulated node, made on first use from what the API server holds."""

    def __init__(self, view: ClusterView, now: Callable[[], float]) -> None:
        self.view = view
        self.now = now
        self._pods: dict[str, _PodState] = {}  # by "namespace/name"
        # Told (pod uid, exit code) when an attached main process ends, so the kubelet ends the container.
        self.on_main_exit: Callable[[str, int], None] | None = None

    def container(self, pod: Obj, name: str) -> SimContainer:
        """The running container ``name`` of ``pod`` (raises :class:`ContainerNotFound`)."""
        status = _running_status(pod, name)
        spec = _spec_of(pod, name)
        if status is None or spec is None:
            raise ContainerNotFound(name)
        meta = pod["metadata"]
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        state = self._pods.get(key)
        if state is None or state.uid != meta.get("uid"):
            self._forget_gone()
            state = _PodState(str(meta.get("uid")), pod_volumes(pod, self.view, self.now()))
            self._pods[key] = state
        container_id = str(status.get("containerID") or "")
        current = state.containers.get(name)
        if current is None or current.container_id != container_id:
            tree = container_tree(pod, spec, state.volumes, list(shell.INSTALLED), self.now())
            uid, gid = _ids(pod, spec)
            current = SimContainer(name, container_id, spec, tree, environment(pod, spec, self.view), uid, gid)
            state.containers[name] = current
        return current

    def _forget_gone(self) -> None:
        for key, state in list(self._pods.items()):
            ns, _, name = key.partition("/")
            pod = self.view.get(PODS, ns, name)
            if pod is None or pod["metadata"].get("uid") != state.uid:
                del self._pods[key]

    async def exec(self, pod: Obj, name: str, argv: list[str], stdin: shell.Input, out: shell.Writer,
                   err: shell.Writer, tty: bool) -> int:
        """Run ``argv`` in the container; its exit status, or raises shell.StartError / ContainerNotFound."""
        container = self.container(pod, name)
        try:
            if not argv:
                raise shell.StartError("exec: no command")
            return await shell.run(container.process(stdin, out, err, tty), argv)
        except shell.StartError as e:
            exec_id = uuid.uuid4().hex + uuid.uuid4().hex
            raise shell.StartError(f'failed to exec in container: failed to start exec "{exec_id}": OCI runtime '
                                   f"exec failed: exec failed: unable to start container process: {e}: unknown") \
                from None

    async def attach(self, pod: Obj, name: str, stdin: shell.Input | None, out: shell.Writer, err: shell.Writer,
                     tty: bool) -> None:
        """Join the container's main process until it ends (stdin closed), the container stops or the caller
        goes away (cancellation)."""
        container = self.container(pod, name)
        argv = [*(container.spec.get("command") or []), *(container.spec.get("args") or [])]
        reads_stdin = bool(container.spec.get("stdin")) and bool(argv) and \
            argv[0].rsplit("/", 1)[-1] in ("sh", "ash", "cat")
        meta = pod["metadata"]
        stopped = asyncio.ensure_future(self._until_stopped(meta["namespace"], meta["name"], name,
                                                            container.container_id))
        try:
            if reads_stdin and stdin is not None:
                main = asyncio.ensure_future(self._main_process(container, argv, stdin, out, err, tty))
                await asyncio.wait([main, stopped], return_when=asyncio.FIRST_COMPLETED)
                if main.done() and not main.cancelled() and self.on_main_exit is not None:
                    self.on_main_exit(str(meta.get("uid")), main.result())
                main.cancel()
                await asyncio.gather(main, return_exceptions=True)
            else:
                await stopped
        finally:
            stopped.cancel()
            await asyncio.gather(stopped, return_exceptions=True)

    async def _main_process(self, container: SimContainer, argv: list[str], stdin: shell.Input, out: shell.Writer,
                            err: shell.Writer, tty: bool) -> int:
        try:
            return await shell.run(container.process(stdin, out, err, tty), argv)
        except shell.StartError:
            return 128

    async def _until_stopped(self, namespace: str, name: str, container: str, container_id: str) -> None:
        while True:
            pod = self.view.get(PODS, namespace, name)
            status = _running_status(pod, container) if pod is not None else None
            if status is None or status.get("containerID") != container_id:
                return
            await asyncio.sleep(_STOP_POLL)

    # --- port-forward --------------------------------------------------------------------------------

    @staticmethod
    def listener(pod: Obj, port: int) -> str | None:
        """The container listening on ``port`` (one that declares it as a TCP containerPort), or None."""
        for c in (pod.get("spec") or {}).get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("containerPort") == port and (p.get("protocol") or "TCP") == "TCP":
                    return str(c.get("name"))
        return None

    @staticmethod
    def refused(pod: Obj, port: int) -> str:
        """containerd's error when nothing in the pod's network namespace accepts ``port``."""
        sandbox = sandbox_id(pod)
        netns = uuid.uuid5(uuid.NAMESPACE_OID, sandbox)
        return (f'failed to execute portforward in network namespace "/var/run/netns/cni-{netns}": failed to '
                f'connect to localhost:{port} inside namespace "{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: '
                f"connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: connection refused ")

    @staticmethod
    def http_answer(pod: Obj, container: str, port: int) -> bytes:
        """What the simulated server on a declared port answers any request with."""
        meta = pod["metadata"]
        body = f"pod {meta.get('namespace')}/{meta.get('name')} container {container} port {port}\n".encode()
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
