"""Whether a node is selected by a v1.NodeSelector (``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``),
the one matcher the controllers share: the DaemonSet controller's placement and the PersistentVolume binder's
volume node affinity (``CheckNodeAffinity``).

Guarantees, as upstream's ``LazyErrorNodeSelector``:
- Terms are ORed; an empty term (no expressions, no fields) selects nothing; no terms select nothing.
- A term ANDs its ``matchExpressions`` (label requirements, validated as ``labels.NewRequirement`` does:
  key and values must be valid, In/NotIn need values, Exists/DoesNotExist none, Gt/Lt one integer) and its
  ``matchFields`` (In/NotIn with exactly one value; a node's only field is ``metadata.name``, any other key
  reads as "").
- A term that does not parse matches no node and the other terms still count (errors are lazy).
- A node without a name has no fields, so ``matchFields`` are not checked at all: ``CheckNodeAffinity`` judges
  a volume against a node built from labels only, and this is what upstream then answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_IN,
    InvalidSelector,
    Requirement,
)

__all__ = ["NODE_NAME_FIELD", "NodeSelector", "match_node_selector_terms", "pod_spec_matches_node"]

NODE_NAME_FIELD = "metadata.name"

_LABEL_OPERATORS: Mapping[str, str] = {
    "In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST, "Gt": GREATER_THAN,
    "Lt": LESS_THAN,
}


@dataclass(frozen=True, slots=True)
class _FieldTerm:
    """``fields.OneTermEqualSelector`` (In) or ``OneTermNotEqualSelector`` (NotIn)."""

    key: str
    value: str
    equal: bool

    def matches(self, node_name: str) -> bool:
        have = node_name if self.key == NODE_NAME_FIELD else ""
        return (have == self.value) is self.equal


@dataclass(frozen=True, slots=True)
class _Term:
    labels: tuple[Requirement, ...]
    fields: tuple[_FieldTerm, ...]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not all(r.matches(labels) for r in self.labels):
            return False
        return not node_name or all(f.matches(node_name) for f in self.fields)


def _values(req: Mapping[str, Any]) -> list[str] | None:
    values = req.get("values") or []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return values


def _label_requirement(req: object) -> Requirement | None:
    if not isinstance(req, Mapping):
        return None
    operator = _LABEL_OPERATORS.get(str(req.get("operator")))
    values = _values(req)
    if operator is None or values is None:
        return None
    try:
        return Requirement.new(str(req.get("key") or ""), operator, values)
    except InvalidSelector:
        return None


def _field_requirement(req: object) -> _FieldTerm | None:
    if not isinstance(req, Mapping):
        return None
    values = _values(req)
    operator = req.get("operator")
    if operator not in ("In", "NotIn") or values is None or len(values) != 1:
        return None
    return _FieldTerm(str(req.get("key") or ""), values[0], operator == "In")


def _parse_term(term: Mapping[str, Any]) -> _Term | None:
    """The term, or None when any of its requirements does not parse."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return None
    labels = [_label_requirement(r) for r in expressions]
    field_terms = [_field_requirement(r) for r in fields]
    if any(r is None for r in labels) or any(f is None for f in field_terms):
        return None
    return _Term(tuple(r for r in labels if r is not None), tuple(f for f in field_terms if f is not None))


class NodeSelector:
    """A v1.NodeSelector's terms, parsed once (``NewLazyErrorNodeSelector``); :meth:`matches` per node."""

    __slots__ = ("_terms",)

    def __init__(self, terms: Sequence[Any] | None) -> None:
        parsed: list[_Term | None] = []
        for term in terms or ():
            if not isinstance(term, Mapping) or not (term.get("matchExpressions") or term.get("matchFields")):
                continue  # an empty term selects no node
            parsed.append(_parse_term(term))
        self._terms = tuple(t for t in parsed if t is not None)

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        """Whether any term selects the node (``LazyErrorNodeSelector.Match``)."""
        return any(t.matches(node_name, labels) for t in self._terms)


def match_node_selector_terms(terms: Sequence[Any] | None, node_name: str, labels: Mapping[str, str]) -> bool:
    """corev1 ``MatchNodeSelectorTerms``: whether any of the terms selects the node."""
    return NodeSelector(terms).matches(node_name, labels)


def pod_spec_matches_node(pod_spec: Mapping[str, Any], node_name: str, labels: Mapping[str, str]) -> bool:
    """``GetRequiredNodeAffinity(pod).Match(node)``: the pod's ``nodeSelector`` ANDed with its required node
    affinity terms (none: every node)."""
    node_selector = pod_spec.get("nodeSelector") or {}
    if isinstance(node_selector, Mapping) and any(labels.get(k) != v for k, v in node_selector.items()):
        return False
    affinity = pod_spec.get("affinity") or {}
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return match_node_selector_terms(required.get("nodeSelectorTerms"), node_name, labels)
