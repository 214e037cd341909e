"""Printers of ``rbac.authorization.k8s.io``: role bindings (roles and cluster roles have none upstream:
they get the default Name / Created At table)."""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver.tables.cells import AGE, NAME, Column, Obj, Printer, age, name


def subjects_strings(subjects: list[Obj]) -> tuple[list[str], list[str], list[str]]:
    """``rbac.SubjectsStrings``: users, groups and ``namespace/name`` service accounts."""
    users, groups, service_accounts = [], [], []
    for s in subjects:
        kind, subject = s.get("kind"), str(s.get("name") or "")
        if kind == "ServiceAccount":
            service_accounts.append(f"{s.get('namespace') or ''}/{subject}")
        elif kind == "User":
            users.append(subject)
        elif kind == "Group":
            groups.append(subject)
    return users, groups, service_accounts


def _binding_cells(binding: Obj, now: float) -> list[Any]:
    ref = binding.get("roleRef") or {}
    users, groups, service_accounts = subjects_strings(binding.get("subjects") or [])
    return [name(binding), f"{ref.get('kind') or ''}/{ref.get('name') or ''}", age(binding, now),
            ", ".join(users), ", ".join(groups), ", ".join(service_accounts)]


_BINDING = Printer((NAME, Column("Role"), AGE, Column("Users", priority=1), Column("Groups", priority=1),
                    Column("ServiceAccounts", priority=1)), _binding_cells)
PRINTERS: dict[str, Printer] = {"RoleBinding": _BINDING, "ClusterRoleBinding": _BINDING}
