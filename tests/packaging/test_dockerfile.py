"""The Dockerfile, read as BuildKit would read it (no Docker engine runs here): known instructions only, a
builder and a slim runtime stage, stage references that exist, a numeric non-root USER, exec-form
ENTRYPOINT of the console script, OCI labels, nothing of the build left in the runtime image; and a
.dockerignore that lets in exactly what the build copies."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import pytest

from tests.packaging.dockerfile import KNOWN, Dockerfile, parse
from tools.render_deploy import ROOT

DOCKERFILE = ROOT / "Dockerfile"
OCI_LABELS = {"title", "description", "version", "revision", "created", "licenses"}
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|make|build-essential|cc|clang|apt-get|pip wheel|git)\b")


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse(DOCKERFILE.read_text())


def test_instructions_are_known_and_directive_selects_the_frontend(dockerfile: Dockerfile) -> None:
    assert dockerfile.directives == {"syntax": "docker/dockerfile:1"}  # RUN --mount needs BuildKit's frontend
    assert [i.keyword for i in dockerfile.all() if i.keyword not in KNOWN] == []


def test_stages_build_then_run_on_slim_python(dockerfile: Dockerfile) -> None:
    args = {i.args.split("=", 1)[0]: i.args.split("=", 1)[1] for i in dockerfile.global_args}
    assert args["PYTHON_IMAGE"] == "python:3.12-slim"
    assert [(s.base, s.name) for s in dockerfile.stages] == [("${PYTHON_IMAGE}", "builder"),
                                                              ("${PYTHON_IMAGE}", "runtime")]
    builder = " ".join(i.args for i in dockerfile.stages[0].instructions if i.keyword == "RUN")
    assert "pip wheel" in builder


def test_every_stage_reference_exists(dockerfile: Dockerfile) -> None:
    names = [s.name for s in dockerfile.stages]
    for index, stage in enumerate(dockerfile.stages):
        for ins in stage.instructions:
            flags = ins.flags()
            refs = [flags["from"]] if "from" in flags else []
            refs += re.findall(r"from=([\w.-]+)", flags.get("mount", ""))
            for ref in refs:
                assert ref in names[:index], f"line {ins.line}: {ref!r} is not an earlier stage"


def test_runtime_stage_is_non_root_with_exec_entrypoint_and_oci_labels(dockerfile: Dockerfile) -> None:
    runtime = dockerfile.stages[-1].instructions
    users = [i.args for i in runtime if i.keyword == "USER"]
    assert users, "the runtime stage must set USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit()
    assert int(user) != 0
    assert group.isdigit()
    assert int(group) != 0
    entrypoints = [i for i in runtime if i.keyword == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert entrypoints[0].exec_form() == ["controller-manager"]
    labels = " ".join(i.args for i in runtime if i.keyword == "LABEL")
    found = {key.removeprefix("org.opencontainers.image.") for key, _, _ in
             (word.partition("=") for word in shlex.split(labels))}
    assert found >= OCI_LABELS
    assert "10257" in [i.args for i in runtime if i.keyword == "EXPOSE"]


def test_runtime_stage_installs_the_wheels_only_and_keeps_no_build_tools(dockerfile: Dockerfile) -> None:
    runtime = dockerfile.stages[-1].instructions
    assert [i for i in runtime if i.keyword in ("COPY", "ADD")] == []  # the wheels are bind-mounted, never copied
    runs = [i.args for i in runtime if i.keyword == "RUN"]
    assert len(runs) == 1
    assert "--mount=type=bind,from=builder,source=/wheels,target=/wheels" in runs[0]
    assert "pip install --no-index --find-links=/wheels controller-manager" in runs[0]
    assert BUILD_TOOLS.findall(runs[0].replace("pip install", "")) == []


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path (or one of its parent directories) decides."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(c, pat) or (pat.startswith("**/") and fnmatch.fnmatchcase(c.split("/")[-1],
                                                                                              pat[3:]))
               for c in candidates):
            ignored = not negate
    return ignored


def build_context() -> list[Path]:
    """The files `docker build .` would send, per .dockerignore."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    # Hidden top-level trees (.git, .venv, caches) are ignored by "*" and no exception names them: not walked.
    tops = [p for p in ROOT.iterdir() if not p.name.startswith(".")]
    files = [f for top in tops for f in ([top] if top.is_file() else top.rglob("*")) if f.is_file()]
    return [p for p in files if not _ignored(p.relative_to(ROOT).as_posix(), patterns)]


def test_dockerignore_sends_only_what_the_build_copies(dockerfile: Dockerfile) -> None:
    context = {p.relative_to(ROOT).as_posix() for p in build_context()}
    assert {"pyproject.toml", "README.md", "controller_manager/__init__.py",
            "controller_manager/manager/main.py", "controller_manager/py.typed"} <= context
    assert all(p in ("pyproject.toml", "README.md") or p.startswith("controller_manager/") for p in context)
    assert not [p for p in context if "__pycache__" in p or p.endswith(".pyc")]
    copies = [ins for ins in dockerfile.stages[0].instructions if ins.keyword == "COPY"]
    assert copies
    for ins in copies:
        *sources, _dest = ins.args.split()
        for src in sources:
            assert any(p == src or p.startswith(src.rstrip("/") + "/") for p in context), src


@pytest.mark.parametrize(("text", "error"), [
    pytest.param("RUN echo hi\n", "before the first FROM", id="run-before-from"),
    pytest.param("FROM a AS\n", "cannot read FROM", id="from-without-name"),
    pytest.param("FROM a\nRUN x \\\n", "line continuation", id="dangling-continuation"),
])
def test_parser_refuses_broken_files(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse(text)


def test_parser_joins_continuations_and_skips_comments() -> None:
    parsed = parse("# syntax=x\nARG A=1\nFROM b AS c\n# note\nRUN one \\\n  # inside\n  two\nCMD [\"x\"]\n")
    assert parsed.directives == {"syntax": "x"}
    [stage] = parsed.stages
    assert [(i.keyword, i.args) for i in stage.instructions] == [("RUN", "one two"), ("CMD", '["x"]')]
    assert stage.instructions[1].exec_form() == ["x"]
    assert stage.instructions[0].exec_form() is None
