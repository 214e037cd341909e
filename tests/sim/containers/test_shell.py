"""The simulated container's commands and shell, run in-process against a tree built from a pod."""

from __future__ import annotations

import io
import tarfile

import pytest

from controller_manager.sim.containers.filesystem import Directory, Tree
from controller_manager.sim.containers.setup import IMAGE_PATH, container_tree
from controller_manager.sim.containers.shell import INSTALLED, Input, Process, StartError, run

POD = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"subdomain": "api"},
       "status": {"podIP": "10.1.2.3"}}


class Run:
    def __init__(self) -> None:
        self.config = Directory()
        Tree(self.config).write("/app.conf", b"mode=fast\n")
        self.config.read_only = True
        container = {"name": "app", "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}
        self.tree = container_tree(POD, container, {"config": self.config}, list(INSTALLED), 0.0)

    async def __call__(self, *argv: str, stdin: bytes = b"", tty: bool = False) -> tuple[int, bytes, bytes]:
        out: list[bytes] = []
        err: list[bytes] = []

        async def o(b: bytes) -> None:
            out.append(b)

        async def e(b: bytes) -> None:
            err.append(b)

        p = Process(self.tree, {"PATH": IMAGE_PATH, "HOME": "/root", "WORDS": "a  b"}, Input(stdin), o, e, tty=tty)
        code = await run(p, list(argv))
        return code, b"".join(out), b"".join(err)


@pytest.fixture
def sh() -> Run:
    return Run()


async def test_quoting_expansion_and_lists(sh: Run) -> None:
    script = """X=1; echo "$X" '$X' ${X}2 $WORDS "$WORDS"; false || echo or; true && echo and; false && echo no
echo status $?; exit 4"""
    assert await sh("sh", "-c", script) == (4, b"1 $X 12 a b a  b\nor\nand\nstatus 1\n", b"")
    assert await sh("sh", "-c", 'echo "$0 $1 $#"', "name", "first") == (0, b"name first 1\n", b"")


async def test_pipes_and_redirections(sh: Run) -> None:
    code, out, err = await sh("sh", "-c", "echo one > /tmp/f; echo two >> /tmp/f; cat < /tmp/f | grep -c o; "
                                          "cat /nope 2>&1 | head -n 1; cat /nope 2>/dev/null || echo failed")
    assert (code, out, err) == (0, b"2\ncat: can't open '/nope': No such file or directory\nfailed\n", b"")
    assert sh.tree.read("/tmp/f") == b"one\ntwo\n"


async def test_unknown_commands(sh: Run) -> None:
    with pytest.raises(StartError, match=r'^exec: "nosuch": executable file not found in \$PATH$'):
        await sh("nosuch")
    with pytest.raises(StartError, match=r'^exec: "/usr/bin/python": stat /usr/bin/python: no such file'):
        await sh("/usr/bin/python")
    with pytest.raises(StartError, match=r'^exec: "/etc/hosts": permission denied$'):
        await sh("/etc/hosts")
    assert await sh("sh", "-c", "nosuch") == (127, b"", b"sh: nosuch: not found\n")
    assert await sh("sh", "-c", "/etc/hosts") == (126, b"", b"sh: /etc/hosts: Permission denied\n")
    with pytest.raises(StartError, match=r'^exec: "cd": executable file not found'):
        await sh("cd", "/tmp")  # a shell builtin, not an executable


async def test_kubelet_files_and_read_only_mounts(sh: Run) -> None:
    assert await sh("hostname") == (0, b"web\n", b"")
    _, hosts, _ = await sh("cat", "/etc/hosts")
    assert hosts.endswith(b"10.1.2.3\tweb.api.shop.svc.cluster.local\tweb\n")
    assert (await sh("cat", "/etc/resolv.conf"))[1].startswith(b"search shop.svc.cluster.local svc.cluster.local")
    assert await sh("cat", "/etc/app/app.conf") == (0, b"mode=fast\n", b"")
    assert await sh("sh", "-c", "echo x > /etc/app/new") == (1, b"", b"sh: can't create /etc/app/new: Read-only "
                                                                   b"file system\n")
    assert await sh("rm", "/etc/app/app.conf") == (1, b"", b"rm: can't remove '/etc/app/app.conf': Read-only "
                                                         b"file system\n")
    assert await sh("id") == (0, b"uid=0(root) gid=0(root) groups=0(root)\n", b"")


async def test_tar_round_trip(sh: Run) -> None:
    await sh("sh", "-c", "mkdir -p /src/sub && echo a > /src/a && echo b > /src/sub/b")
    code, archive, err = await sh("tar", "cf", "-", "/src")
    assert (code, err) == (0, b"tar: removing leading '/' from member names\n")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
    assert names == ["src", "src/a", "src/sub", "src/sub/b"]
    await sh("mkdir", "/dst")
    assert await sh("tar", "-xmf", "-", "-C", "/dst", stdin=archive) == (0, b"", b"")
    assert sh.tree.read("/dst/src/sub/b") == b"b\n"
    code, _, err = await sh("tar", "cf", "-", "/missing")
    assert (code, err) == (1, b"tar: /missing: No such file or directory\n")


async def test_interactive_shell_with_a_tty(sh: Run) -> None:
    code, out, _ = await sh("sh", stdin=b"echo hi\rexit 2\r", tty=True)
    assert (code, out) == (2, b"/ # echo hi\r\nhi\n/ # exit 2\r\n")
