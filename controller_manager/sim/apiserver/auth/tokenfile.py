"""kube-apiserver's ``--token-auth-file``: static bearer tokens read from a CSV file at start-up.

Guarantees:
- Each record is ``token,user,uid[,"group1,group2"]`` (csv quoting; leading spaces trimmed; blank lines
  skipped). A record with fewer than 3 columns is a ValueError naming the file and the count, as upstream's
  "must have at least 3 columns (token, user name, user uid), found N". Groups are split on commas, trimmed,
  empty ones dropped. A token given twice keeps its last record.
- Every user gets ``system:authenticated`` after its own groups (the authenticated-group adder).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from controller_manager.sim.apiserver.auth.users import AUTHENTICATED, User

__all__ = ["parse_token_file", "read_token_file"]


def parse_token_file(text: str, name: str = "") -> dict[str, User]:
    users: dict[str, User] = {}
    for record in csv.reader(io.StringIO(text), skipinitialspace=True):
        if not record:
            continue
        if len(record) < 3:
            raise ValueError(f"token file '{name}' must have at least 3 columns (token, user name, user uid), "
                             f"found {len(record)}")
        token, user, uid = record[0], record[1], record[2]
        groups = [g.strip() for g in record[3].split(",")] if len(record) > 3 else []
        groups = [g for g in groups if g]
        if AUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
        users[token] = User(user, uid, tuple(groups))
    return users


def read_token_file(path: str | Path) -> dict[str, User]:
    return parse_token_file(Path(path).read_text(), str(path))
