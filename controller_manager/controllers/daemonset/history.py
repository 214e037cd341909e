"""A DaemonSet's history: ControllerRevisions holding each pod template it had (``update.go``'s history half).

Guarantees:
- :func:`get_patch` is upstream's ``getPatch``: ``{"spec":{"template":{...,"$patch":"replace"}}}`` encoded as Go's
  ``json.Marshal`` of a generic map encodes it (keys sorted, compact, ``<``, ``>``, ``&``, U+2028/2029 escaped,
  float64 number formatting), so the bytes equal upstream's for the same DaemonSet JSON. A revision matches a
  DaemonSet when its ``data`` encodes to the same bytes (``Match``).
- Revisions are named ``<ds>-<hash>`` with ``hash = compute_hash(template, status.collisionCount)`` (upstream's
  ``ComputeHash`` shape; the value differs, which only names things), labelled with the template's labels plus
  ``controller-revision-hash: <hash>``, annotated with the DaemonSet's annotations, controlled by it, and
  numbered one past the highest older revision.
- :meth:`History.construct` claims (adopts/releases) the revisions, labels old ones lacking the hash label with
  their name, dedups identical current revisions (the newest survives; pods of the others are relabelled first),
  bumps the current revision's number when an older one became current again, and on a name clash with a
  different template bumps ``status.collisionCount`` (only if the cached count was fresh) and raises so the sync
  is retried under the new name.
- :meth:`History.cleanup` deletes the oldest revisions beyond ``revisionHistoryLimit`` (default 10), never one
  whose hash a live pod still carries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson
import structlog

from controller_manager.api.meta import meta
from controller_manager.api.resources import CONTROLLERREVISIONS, DAEMONSETS, PODS
from controller_manager.api.selectors import Selector
from controller_manager.client import ApiClient
from controller_manager.client.errors import AlreadyExists
from controller_manager.controllerutil.controller_ref import ControllerRefManager, live_owner_check, new_controller_ref
from controller_manager.controllerutil.controller_utils import compute_hash
from controller_manager.controllerutil.sharding import inherit_shard_labels
from controller_manager.runtime.informers import NAMESPACE_INDEX, SharedInformer

from .util import CONTROLLER_REVISION_HASH_LABEL

__all__ = [
    "DEFAULT_REVISION_HISTORY_LIMIT",
    "History",
    "StaleCollisionCount",
    "get_patch",
    "go_json",
    "match",
    "revision_hash",
    "revision_name",
]

Obj = Mapping[str, Any]

DEFAULT_REVISION_HISTORY_LIMIT = 10

_log = structlog.get_logger("controller_manager.controllers.daemonset.history")

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class StaleCollisionCount(RuntimeError):
    """The cached DaemonSet's collisionCount was older than the server's; retry after the cache catches up."""


def _go_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ch < " " or ch in "<>&\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_float(value: float) -> str:
    """strconv.FormatFloat(f, 'f' or 'e', -1, 64) as encoding/json picks them."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = Decimal(repr(value))
    if 1e-6 <= abs(value) < 1e21:
        text = format(shortest, "f")
        return text[:-2] if text.endswith(".0") else text
    sign, digits, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)
    numerals = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = exponent + len(digits) - 1
    mantissa = numerals[0] + ("." + numerals[1:] if len(numerals) > 1 else "")
    exp_text = f"{abs(exp10):02d}" if exp10 >= 0 else str(abs(exp10))
    return f"{'-' if sign else ''}{mantissa}e{'+' if exp10 >= 0 else '-'}{exp_text}"


def _encode(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        # A Go map holds JSON numbers as float64: huge integers lose precision exactly as upstream's do.
        out.append(str(value) if abs(value) < 2**53 else _go_float(float(value)))
    elif isinstance(value, float):
        out.append(_go_float(value))
    elif isinstance(value, str):
        out.append(_go_string(value))
    elif isinstance(value, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(value, key=lambda k: str(k).encode())):
            if i:
                out.append(",")
            out.append(_go_string(str(key)))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"json: unsupported type: {type(value).__name__}")


def go_json(value: Any) -> bytes:
    """``json.Marshal`` of a generic Go value (``map[string]interface{}`` and friends) as bytes."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out).encode()


def patch_object(ds: Obj) -> dict[str, Any]:
    """The strategic-merge patch restoring the DaemonSet's template (what a revision stores)."""
    template = dict((ds.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def get_patch(ds: Obj) -> bytes:
    """``getPatch``: the revision data for the DaemonSet's current template, as bytes."""
    return go_json(patch_object(ds))


def match(ds: Obj, revision: Obj) -> bool:
    """The revision holds the DaemonSet's current template (``Match``)."""
    data = revision.get("data")
    return data is not None and go_json(data) == get_patch(ds)


def _collision_count(ds: Obj) -> int | None:
    value = (ds.get("status") or {}).get("collisionCount")
    return value if isinstance(value, int) else None


def revision_hash(ds: Obj) -> str:
    return compute_hash((ds.get("spec") or {}).get("template") or {}, _collision_count(ds))


def revision_name(ds: Obj, hash_: str) -> str:
    return f"{meta(ds).get('name', '')}-{hash_}"


def _revision_number(revision: Obj) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) else 0


def history_limit(ds: Obj) -> int:
    value = (ds.get("spec") or {}).get("revisionHistoryLimit")
    return value if isinstance(value, int) else DEFAULT_REVISION_HISTORY_LIMIT


class History:
    """Reads and writes one controller's ControllerRevisions (one instance per controller)."""

    def __init__(self, client: ApiClient, revisions: SharedInformer) -> None:
        self._client = client
        self._revisions = revisions

    async def _claim(self, ds: Obj, selector: Selector) -> list[Obj]:
        namespace = str(meta(ds).get("namespace") or "")
        candidates = self._revisions.store.by_index(NAMESPACE_INDEX, namespace)
        manager = ControllerRefManager(self._client, ds, DAEMONSETS, selector, CONTROLLERREVISIONS,
                                       live_owner_check(self._client, DAEMONSETS, ds))
        return await manager.claim(candidates)

    async def construct(self, ds: Obj, selector: Selector, pods: Sequence[Obj]) -> tuple[Obj, list[Obj]]:
        """``constructHistory``: the current revision (created if needed) and the old ones.

        ``pods`` are the DaemonSet's claimed pods (relabelled if duplicate current revisions are merged).
        """
        current: list[Obj] = []
        old: list[Obj] = []
        for revision in await self._claim(ds, selector):
            labels = meta(revision).get("labels") or {}
            if CONTROLLER_REVISION_HASH_LABEL not in labels:
                # Revisions from before the hash label: the name is unique, so it serves as the hash.
                updated = {**revision, "metadata": {**meta(revision), "labels": {
                    **labels, CONTROLLER_REVISION_HASH_LABEL: meta(revision).get("name", "")}}}
                revision = await self._client.update(CONTROLLERREVISIONS, updated)
            (current if match(ds, revision) else old).append(revision)

        next_number = max((_revision_number(r) for r in old), default=0) + 1
        if not current:
            return await self._snapshot(ds, next_number), old
        cur = await self._dedup(ds, current, pods)
        if _revision_number(cur) < next_number:
            # An older template became current again (a rollback): it becomes the newest revision.
            await self._client.update(CONTROLLERREVISIONS, {**cur, "revision": next_number})
        return cur, old

    async def _dedup(self, ds: Obj, current: list[Obj], pods: Sequence[Obj]) -> Obj:
        if len(current) == 1:
            return current[0]
        keep = current[0]
        for revision in current:
            if _revision_number(revision) >= _revision_number(keep):
                keep = revision
        keep_hash = (meta(keep).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL)
        namespace = meta(ds).get("namespace")
        for pod in pods:
            if (meta(pod).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL) != keep_hash:
                patch = {"metadata": {"labels": {CONTROLLER_REVISION_HASH_LABEL: keep_hash}}}
                await self._client.patch(PODS, str(meta(pod).get("name")), patch, namespace, patch_type="merge")
        for revision in current:
            if meta(revision).get("name") != meta(keep).get("name"):
                await self._client.delete(CONTROLLERREVISIONS, str(meta(revision).get("name")), namespace)
        return keep

    async def _snapshot(self, ds: Obj, number: int) -> Obj:
        m = meta(ds)
        hash_ = revision_hash(ds)
        name = revision_name(ds, hash_)
        namespace = str(m.get("namespace") or "")
        template_labels = meta((ds.get("spec") or {}).get("template") or {}).get("labels") or {}
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "labels": inherit_shard_labels(ds, {**template_labels, CONTROLLER_REVISION_HASH_LABEL: hash_}),
            "ownerReferences": [new_controller_ref(ds, DAEMONSETS)],
        }
        if m.get("annotations"):
            metadata["annotations"] = dict(m["annotations"])
        # Sent in the key order of the bytes upstream stores, so clients comparing raw bytes (kubectl's
        # rollout undo) see the same data.
        data = orjson.loads(get_patch(ds))
        revision = {"apiVersion": CONTROLLERREVISIONS.api_version, "kind": CONTROLLERREVISIONS.kind,
                    "metadata": metadata, "data": data, "revision": number}
        try:
            return await self._client.create(CONTROLLERREVISIONS, revision, namespace)
        except AlreadyExists as clash:
            existing = await self._client.get(CONTROLLERREVISIONS, name, namespace)
            if match(ds, existing):
                return existing  # we made it on an earlier try
            # Same name, other template: a hash collision. Bump collisionCount so the next name differs.
            fresh = await self._client.get(DAEMONSETS, str(m.get("name")), namespace)
            if _collision_count(fresh) != _collision_count(ds):
                raise StaleCollisionCount(
                    f"found a stale collision count ({_collision_count(ds)}, expected {_collision_count(fresh)}) of "
                    f"DaemonSet {m.get('name')!r} while processing; will retry until it is updated") from clash
            status = dict(fresh.get("status") or {})
            status["collisionCount"] = (_collision_count(fresh) or 0) + 1
            await self._client.update_status(DAEMONSETS, {**fresh, "status": status})
            _log.info("found a hash collision for DaemonSet, bumping collisionCount", daemonset=f"{namespace}/"
                      f"{m.get('name')}", collision_count=status["collisionCount"])
            raise

    async def cleanup(self, ds: Obj, old: Sequence[Obj], pods: Sequence[Obj]) -> None:
        """``cleanupHistory``: ``pods`` are every claimed pod, terminal deleted ones included."""
        to_kill = len(old) - history_limit(ds)
        if to_kill <= 0:
            return
        live = {h for p in pods if (h := (meta(p).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL))}
        namespace = meta(ds).get("namespace")
        for revision in sorted(old, key=_revision_number):
            if to_kill <= 0:
                break
            if (meta(revision).get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL) in live:
                continue
            await self._client.delete(CONTROLLERREVISIONS, str(meta(revision).get("name")), namespace)
            to_kill -= 1
