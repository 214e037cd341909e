"""SELinux labels as kube-controller-manager can know them (``selinuxwarning/translator``).

Guarantees:
- :func:`file_label` joins a ``seLinuxOptions``' user, role, type and level with ``:``, defaulting nothing (the
  controller cannot read the nodes' ``/etc/selinux`` defaults); None or all-empty options give ``""``.
- :func:`conflicts` compares two such labels part by part (the level keeps its own colons): an empty part is
  unknown and conflicts with nothing; two labels conflict when some part is set, differently, in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["conflicts", "file_label"]


def file_label(options: Mapping[str, Any] | None) -> str:
    if not options:
        return ""
    label = ":".join(str(options.get(part) or "") for part in ("user", "role", "type", "level"))
    return "" if label == ":::" else label


def conflicts(label_a: str, label_b: str) -> bool:
    parts_a, parts_b = label_a.split(":", 3), label_b.split(":", 3)
    width = max(len(parts_a), len(parts_b))
    parts_a += [""] * (width - len(parts_a))
    parts_b += [""] * (width - len(parts_b))
    return any(a and b and a != b for a, b in zip(parts_a, parts_b, strict=True))
