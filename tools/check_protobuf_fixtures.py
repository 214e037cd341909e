"""Check kube-sim's protobuf codec byte for byte against upstream's serialization fixtures.

kubernetes/api keeps, for every kind, the same object as JSON and as protobuf (``testdata/<release>/
<group>.<version>.<Kind>.{json,pb}``). For each pair this checks that decoding the ``.pb`` gives the JSON (both
in Go's JSON form, :func:`gojson.normalize`) and that encoding the JSON gives exactly the ``.pb`` bytes:

    python tools/check_protobuf_fixtures.py /path/to/kubernetes/api.git [--rev HEAD] [--dir testdata/HEAD]

apiextensions-apiserver keeps the same for the CustomResourceDefinition kind (``pkg/apis/testdata/HEAD``); its
v1beta1 fixtures fail as having no struct (v1beta1 is no longer served):

    python tools/check_protobuf_fixtures.py /path/to/apiextensions-apiserver.git --dir pkg/apis/testdata/HEAD

The fixtures are read from the git directory; nothing is copied into this repository.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

import orjson

from controller_manager.sim.apiserver import gojson, protobuf, schema


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def check_one(stem: str, json_raw: bytes, pb_raw: bytes) -> list[str]:
    """The problems with one fixture pair (empty when it round-trips exactly)."""
    expected_json: dict[str, Any] = orjson.loads(json_raw)
    api_version, kind, raw = protobuf.decode_envelope(pb_raw)
    if not kind:
        # An envelope without a kind (WatchEvent is written bare): the file name says what it holds.
        name = protobuf.meta_struct(stem.rsplit(".", 1)[-1])
        if name is None:
            return [f"no kind in the envelope of {stem}"]
        got = protobuf.decode_message(raw, name)
        want = gojson.normalize(expected_json, schema.struct(name))
        encoded = protobuf.encode_message(want, name)
        problems = [] if gojson.normalize(got, schema.struct(name)) == want else ["decode differs"]
        return problems + ([] if encoded == raw else ["encode differs"])
    name = protobuf.struct_for(api_version, kind)
    if name is None:
        return [f"no struct for {api_version}/{kind}"]
    st = schema.struct(name)
    problems = []
    want = gojson.normalize(expected_json, st)
    try:
        decoded = protobuf.decode_object(pb_raw)
        got = gojson.normalize(decoded, st)
        if got != want:
            problems.append("decode differs: " + _first_difference(want, got))
    except (protobuf.ProtobufError, gojson.GoTypeError) as e:
        problems.append(f"decode failed: {e}")
    try:
        encoded = protobuf.encode_object(want, name)
        if encoded != pb_raw:
            at = next((i for i, (a, b) in enumerate(zip(encoded, pb_raw, strict=False)) if a != b),
                      min(len(encoded), len(pb_raw)))
            window = slice(max(0, at - 16), at + 16)
            problems.append(f"encode differs at byte {at} (got {len(encoded)} bytes, want {len(pb_raw)}): "
                            f"got {encoded[window].hex()} want {pb_raw[window].hex()}")
    except (protobuf.ProtobufError, gojson.GoTypeError, ValueError) as e:
        problems.append(f"encode failed: {e!r}")
    return problems


def _first_difference(want: Any, got: Any, path: str = "") -> str:
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if want.get(key, "<absent>") != got.get(key, "<absent>"):
                return _first_difference(want.get(key, "<absent>"), got.get(key, "<absent>"), f"{path}.{key}")
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return f"{path}: want {str(want)[:200]} got {str(got)[:200]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", help="git directory of kubernetes/api")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--dir", default="testdata/HEAD")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    names = _git(args.repo, "ls-tree", "--name-only", f"{args.rev}:{args.dir}").decode().split()
    stems = sorted(n[:-3] for n in names if n.endswith(".pb"))
    failed = 0
    for stem in stems:
        json_raw = _git(args.repo, "show", f"{args.rev}:{args.dir}/{stem}.json")
        pb_raw = _git(args.repo, "show", f"{args.rev}:{args.dir}/{stem}.pb")
        problems = check_one(stem, json_raw, pb_raw)
        if problems:
            failed += 1
            print(f"FAIL {stem}")
            for p in problems:
                print(f"    {p}")
        elif args.verbose:
            print(f"ok   {stem}")
    print(f"{len(stems) - failed}/{len(stems)} fixtures decode and encode exactly", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
