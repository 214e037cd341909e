"""Event reasons and messages of the disruption controller, worded (and formatted) as upstream's.

Guarantees:
- Every reason and message template is upstream's string; Go's ``%q`` and ``%v`` renderings the messages embed are
  reproduced: :func:`go_quote` quotes as ``strconv.Quote`` does for printable text, :func:`go_label_selector`
  prints a ``*metav1.LabelSelector`` as its generated ``String()`` method does (``nil`` for a missing one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CALCULATE_EXPECTED_POD_COUNT_FAILED",
    "MULTIPLE_PDBS",
    "NOT_DELETED",
    "NO_PODS",
    "UNMANAGED_PODS",
    "calculate_failed_message",
    "get_pods_failed_message",
    "go_label_selector",
    "go_quote",
    "multiple_pdbs_message",
    "no_controllers_message",
    "not_deleted_message",
    "unmanaged_pods_message",
]

NO_PODS = "NoPods"
CALCULATE_EXPECTED_POD_COUNT_FAILED = "CalculateExpectedPodCountFailed"
UNMANAGED_PODS = "UnmanagedPods"
NOT_DELETED = "NotDeleted"
MULTIPLE_PDBS = "MultiplePodDisruptionBudgets"

NO_MATCHING_PODS_MESSAGE = "No matching pods found"


def go_quote(text: str) -> str:
    """``%q`` of a string: double quotes, backslash escapes (JSON's are the same for printable text)."""
    return json.dumps(text, ensure_ascii=False)


def _go_list(values: Any) -> str:
    return "[" + " ".join(str(v) for v in values or ()) + "]"


def go_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``fmt.Sprintf("%v", pdb.Spec.Selector)``: the gogo-protobuf ``String()`` of a LabelSelector pointer."""
    if selector is None:
        return "nil"
    labels = selector.get("matchLabels") or {}
    match_labels = "map[string]string{" + "".join(f"{k}: {labels[k]}," for k in sorted(labels)) + "}"
    requirements = ""
    for req in selector.get("matchExpressions") or ():
        req = req if isinstance(req, Mapping) else {}
        requirements += (f"LabelSelectorRequirement{{Key:{req.get('key', '')},Operator:{req.get('operator', '')},"
                         f"Values:{_go_list(req.get('values'))},}},")
    return (f"&LabelSelector{{MatchLabels:{match_labels},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{requirements}}},}}")


def get_pods_failed_message(err: object) -> str:
    return f"Failed to get pods: {err}"


def calculate_failed_message(err: object) -> str:
    return f"Failed to calculate the number of expected pods: {err}"


def no_controllers_message(pod_name: str) -> str:
    return f"found no controllers for pod {go_quote(pod_name)}"


def unmanaged_pods_message(selector: Mapping[str, Any] | None) -> str:
    return (f"Pods selected by this PodDisruptionBudget (selector: {go_label_selector(selector)}) were found "
            "to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result "
            "in undefined behavior. To account for these pods please set \".spec.minAvailable\" "
            "field of the PDB to an integer value.")


def not_deleted_message(namespace: str) -> str:
    # Upstream passes the PDB's namespace twice (not its name); kept so the event reads as theirs does.
    return f"Pod was expected by PDB {namespace}/{namespace} to be deleted but it wasn't"


def multiple_pdbs_message(namespace: str, pod_name: str, chosen: str) -> str:
    return (f"Pod {go_quote(namespace)}/{go_quote(pod_name)} matches multiple PodDisruptionBudgets.  "
            f"Chose {go_quote(chosen)} arbitrarily.")
