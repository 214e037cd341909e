"""The dependency graph: one node per object (or per owner referenced but not yet seen), owners to dependents.

Guarantees (upstream ``graph.go``):
- A :class:`Node` is written only by the graph builder's single processor; the delete/orphan workers read it.
  asyncio runs one coroutine at a time and the processor never awaits mid-change, so a reader never sees a
  half-made change and no locks are needed.
- ``virtual`` nodes stand for owners named by an ownerReference but not observed through an informer yet;
  their identity (apiVersion, kind, name, namespace) is a guess from the first dependent that named them.
- Nodes compare and hash by identity (like upstream's ``*node`` pointers), so a queue holding a node that the
  builder has since replaced with a clone still holds the old one, and the workers detect that.
- ``owners`` are the object's ownerReference dicts as cached (shared, never mutated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OwnerRef = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """An owner reference's coordinates plus the namespace: how the collector names an object."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str = ""

    def __str__(self) -> str:
        # Upstream's objectReference.String(); Event messages quote it, so keep the exact shape.
        return f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, name: {self.name}, uid: {self.uid}]"

    @classmethod
    def from_owner_ref(cls, ref: OwnerRef, namespace: str = "") -> ObjectReference:
        return cls(str(ref.get("apiVersion", "")), str(ref.get("kind", "")), str(ref.get("name", "")),
                   str(ref.get("uid", "")), namespace)

    def with_namespace(self, namespace: str) -> ObjectReference:
        return ObjectReference(self.api_version, self.kind, self.name, self.uid, namespace)

    def as_object(self) -> dict[str, Any]:
        """A minimal object for the event recorder and for virtual delete events."""
        metadata: dict[str, Any] = {"name": self.name, "uid": self.uid}
        if self.namespace:
            metadata["namespace"] = self.namespace
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata}


def owner_ref_matches(ref: OwnerRef, identity: ObjectReference) -> bool:
    """True if ``ref`` names ``identity``'s uid, name, kind and apiVersion (upstream's coordinates)."""
    return (str(ref.get("uid", "")) == identity.uid and str(ref.get("name", "")) == identity.name
            and str(ref.get("kind", "")) == identity.kind and str(ref.get("apiVersion", "")) == identity.api_version)


def is_blocking(ref: OwnerRef) -> bool:
    return ref.get("blockOwnerDeletion") is True


class Node:
    """One object in the graph. ``dependents`` is allocated on first use: most objects own nothing."""

    __slots__ = ("_dependents", "being_deleted", "deleting_dependents", "identity", "owners", "virtual")

    def __init__(self, identity: ObjectReference, owners: Sequence[OwnerRef] = (), *, virtual: bool = False,
                 being_deleted: bool = False, deleting_dependents: bool = False) -> None:
        self.identity = identity
        self.owners: tuple[OwnerRef, ...] = tuple(owners)
        self.virtual = virtual
        self.being_deleted = being_deleted
        self.deleting_dependents = deleting_dependents
        self._dependents: set[Node] | None = None

    def __repr__(self) -> str:
        flags = "".join(f" {name}" for name in ("virtual", "being_deleted", "deleting_dependents")
                        if getattr(self, name))
        return f"<Node {self.identity}{flags} owners={len(self.owners)} dependents={self.dependents_length()}>"

    def clone(self) -> Node:
        """A copy with its own dependents set (the builder replaces nodes rather than editing identities)."""
        copy = Node(self.identity, self.owners, virtual=self.virtual, being_deleted=self.being_deleted,
                    deleting_dependents=self.deleting_dependents)
        if self._dependents:
            copy._dependents = set(self._dependents)
        return copy

    def is_observed(self) -> bool:
        return not self.virtual

    def mark_observed(self) -> None:
        self.virtual = False

    def mark_being_deleted(self) -> None:
        # Being deleted is a one-way trip, so there is no way back.
        self.being_deleted = True

    def mark_deleting_dependents(self) -> None:
        self.deleting_dependents = True

    def add_dependent(self, dependent: Node) -> None:
        if self._dependents is None:
            self._dependents = set()
        self._dependents.add(dependent)

    def delete_dependent(self, dependent: Node) -> None:
        if self._dependents:
            self._dependents.discard(dependent)
            if not self._dependents:
                self._dependents = None

    def replace_dependent_if_exists(self, old: Node, new: Node) -> None:
        if self._dependents and old in self._dependents:
            self._dependents.discard(old)
            self._dependents.add(new)

    def dependents_length(self) -> int:
        return len(self._dependents) if self._dependents else 0

    def get_dependents(self) -> list[Node]:
        """A snapshot: later graph changes do not show in it."""
        return list(self._dependents) if self._dependents else []

    def blocking_dependents(self) -> list[Node]:
        """Dependents whose ownerReference to this node has ``blockOwnerDeletion: true``."""
        uid = self.identity.uid
        return [dep for dep in self.get_dependents()
                if any(str(ref.get("uid", "")) == uid and is_blocking(ref) for ref in dep.owners)]

    def set_owners(self, owners: Iterable[OwnerRef]) -> None:
        self.owners = tuple(owners)


def partition_dependents(dependents: Iterable[Node], match: ObjectReference) -> tuple[list[Node], list[Node]]:
    """Dependents whose reference to ``match.uid`` agrees with ``match``'s coordinates, and those that disagree
    (a dependent naming the uid twice, differently, is in both). A namespaced owner matches no dependent in
    another namespace: ownerReferences are namespace-local."""
    matching: list[Node] = []
    nonmatching: list[Node] = []
    owner_is_namespaced = bool(match.namespace)
    for dep in dependents:
        found_match = found_mismatch = False
        if owner_is_namespaced and match.namespace != dep.identity.namespace:
            found_mismatch = True
        else:
            for ref in dep.owners:
                if str(ref.get("uid", "")) == match.uid:
                    if owner_ref_matches(ref, match):
                        found_match = True
                    else:
                        found_mismatch = True
        if found_match:
            matching.append(dep)
        if found_mismatch:
            nonmatching.append(dep)
    return matching, nonmatching


def _sort_key(ref: ObjectReference) -> tuple[str, str, str, str, str]:
    # kind/apiVersion before namespace, so kinds order the same whether cluster-scoped or namespaced.
    return (ref.kind, ref.api_version, ref.namespace, ref.name, ref.uid)


def alternate_owner_identity(dependents: Iterable[Node], absent: ObjectReference) -> ObjectReference | None:
    """Another identity the dependents give ``absent.uid``: the first after ``absent`` in (kind, apiVersion,
    namespace, name, uid) order, else the first overall; None if every dependent agrees with ``absent``."""
    absent_cluster_scoped = not absent.namespace
    seen: set[ObjectReference] = {absent}
    first: ObjectReference | None = None
    first_following: ObjectReference | None = None
    absent_key = _sort_key(absent)
    for dep in dependents:
        for ref in dep.owners:
            if str(ref.get("uid", "")) != absent.uid:
                continue
            if owner_ref_matches(ref, absent) and (absent_cluster_scoped or absent.namespace == dep.identity.namespace):
                continue
            alt = ObjectReference.from_owner_ref(ref, dep.identity.namespace)
            if absent_cluster_scoped and alt.api_version == absent.api_version and alt.kind == absent.kind:
                # The absent identity proved this apiVersion/kind cluster-scoped: drop the namespace.
                alt = alt.with_namespace("")
            if alt in seen:
                continue
            seen.add(alt)
            key = _sort_key(alt)
            if first is None or key < _sort_key(first):
                first = alt
            if absent_key < key and (first_following is None or key < _sort_key(first_following)):
                first_following = alt
    return first_following if first_following is not None else first


def references_diffs(old: Sequence[OwnerRef], new: Sequence[OwnerRef]
                     ) -> tuple[list[OwnerRef], list[OwnerRef], list[tuple[OwnerRef, OwnerRef]]]:
    """(added, removed, changed as (old, new)) between two ownerReference lists, matched by uid."""
    old_by_uid = {str(ref.get("uid", "")): ref for ref in old}
    remaining = dict(old_by_uid)
    added: list[OwnerRef] = []
    changed: list[tuple[OwnerRef, OwnerRef]] = []
    for ref in new:
        uid = str(ref.get("uid", ""))
        if uid in remaining:
            before = remaining.pop(uid)
            if before != ref:
                changed.append((before, ref))
        else:
            added.append(ref)
    return added, list(remaining.values()), changed
