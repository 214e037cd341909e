"""Printers of ``admissionregistration.k8s.io``: webhook configurations, admission policies and bindings."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Obj, Printer, age, count, name, spec


def _param_kind(policy: Obj) -> str:
    kind = spec(policy).get("paramKind")
    return "<unset>" if kind is None else f"{kind.get('apiVersion') or ''}/{kind.get('kind') or ''}"


def _param_ref(binding: Obj) -> str:
    ref = spec(binding).get("paramRef")
    if ref is None:
        return "<unset>"
    if ref.get("name"):
        # Whether the param is cluster-scoped is not known here: a name without namespace reads "*/name".
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if ref.get("selector") is not None:
        return go_label_selector_string(ref["selector"])
    return "<unset>"


def go_label_selector_string(selector: Obj) -> str:
    """The generated Go ``(*metav1.LabelSelector).String()`` (a struct dump, not the selector syntax), which is
    what upstream prints for a binding's param selector."""
    labels = "".join(f"{k}: {v}," for k, v in sorted((selector.get("matchLabels") or {}).items()))
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.get('key') or ''},Operator:{e.get('operator') or ''},"
        f"Values:[{' '.join(e.get('values') or [])}],}},"
        for e in selector.get("matchExpressions") or [])
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}")


def _policy(rules: str, column: str) -> Printer:
    return Printer((NAME, Column(column, "integer"), Column("ParamKind"), AGE),
                   lambda o, now: [name(o), count(spec(o).get(rules)), _param_kind(o), age(o, now)])


def _binding_cells(binding: Obj, now: float) -> list[Any]:
    return [name(binding), str(spec(binding).get("policyName") or ""), _param_ref(binding), age(binding, now)]


_WEBHOOKS = Printer((NAME, Column("Webhooks", "integer"), AGE),
                    lambda o, now: [name(o), count(o.get("webhooks")), age(o, now)])
_BINDING = Printer((NAME, Column("PolicyName"), Column("ParamRef"), AGE), _binding_cells)
PRINTERS: dict[str, Printer] = {
    "MutatingWebhookConfiguration": _WEBHOOKS,
    "ValidatingWebhookConfiguration": _WEBHOOKS,
    "ValidatingAdmissionPolicy": _policy("validations", "Validations"),
    "ValidatingAdmissionPolicyBinding": _BINDING,
    "MutatingAdmissionPolicy": _policy("mutations", "Mutations"),
    "MutatingAdmissionPolicyBinding": _BINDING,
}
