"""Rollback through the deprecated ``deprecated.deployment.rollback.to`` annotation: upstream's ``rollback.go``.

The extensions/v1beta1 ``spec.rollbackTo`` field round-trips through apps/v1 as that annotation; ``kubectl
rollout undo`` no longer uses it (it patches the template itself), but a Deployment carrying it is still
rolled back as upstream does.

Guarantees:
- Revision 0 means the previous revision; none found -> Warning ``DeploymentRollbackRevisionNotFound``
  ("Unable to find last revision.").
- The ReplicaSet with the requested revision gives the Deployment its template (without the hash label) and
  its annotations (protected ones kept), and a Normal ``DeploymentRollback`` event "Rolled back deployment
  "X" to revision N" follows; the same template -> Warning ``DeploymentRollbackTemplateUnchanged``; no such
  revision -> Warning ``DeploymentRollbackRevisionNotFound`` ("Unable to find the revision to rollback to.").
- In every case the annotation is removed in the same Deployment update, so a rollback runs once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from controller_manager.api.meta import deep_copy, meta
from controller_manager.controllers.deployment import util_annotations
from controller_manager.controllers.deployment.util_annotations import (
    DEPRECATED_ROLLBACK_TO_ANNOTATION,
    last_revision,
    set_deployment_annotations_to,
)
from controller_manager.controllers.deployment.util_conditions import (
    ROLLBACK_DONE,
    ROLLBACK_REVISION_NOT_FOUND,
    ROLLBACK_TEMPLATE_UNCHANGED,
)
from controller_manager.controllers.deployment.util_replicasets import equal_ignore_hash, set_from_replica_set_template

from .control import DeploymentControl, Obj
from .sync import get_all_replica_sets_and_sync_revision

__all__ = ["get_rollback_to", "rollback", "rollback_to_template", "set_rollback_to",
           "update_deployment_and_clear_rollback_to"]

_INT64 = re.compile(r"[+-]?[0-9]+")


def get_rollback_to(d: Obj) -> int | None:
    """The requested rollback revision, or None when none is requested (or the annotation is not an int)."""
    text = (meta(d).get("annotations") or {}).get(DEPRECATED_ROLLBACK_TO_ANNOTATION, "")
    if not text or not _INT64.fullmatch(text):
        return None
    value = int(text)
    if not -(2**63) <= value < 2**63:
        return None
    return value


def set_rollback_to(d: Obj, revision: int | None) -> dict[str, Any]:
    """A new Deployment: ``d`` requesting a rollback to ``revision`` (with None, requesting none)."""
    m = meta(d)
    annotations = {k: v for k, v in (m.get("annotations") or {}).items() if k != DEPRECATED_ROLLBACK_TO_ANNOTATION}
    if revision is not None:
        annotations[DEPRECATED_ROLLBACK_TO_ANNOTATION] = str(revision)
    return {**d, "metadata": {**m, "annotations": annotations}}


async def rollback(dc: DeploymentControl, d: Obj, rs_list: Sequence[Obj]) -> Obj:
    """Roll ``d`` back to the requested revision, then clear the request; returns the Deployment as it now is."""
    new_rs, old_rss, d = await get_all_replica_sets_and_sync_revision(dc, d, rs_list, True)
    all_rss = [rs for rs in [*old_rss, new_rs] if rs is not None]
    target = get_rollback_to(d) or 0
    if target == 0:
        target = last_revision(all_rss)
        if target == 0:
            dc.event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.")
            return await update_deployment_and_clear_rollback_to(dc, d)
    for rs in all_rss:
        try:
            rev = util_annotations.revision(rs)
        except ValueError as err:
            dc.log.debug("unable to extract revision from deployment's replica set", replica_set=meta(rs).get("name"),
                         error=str(err))
            continue
        if rev == target:
            performed, d = await rollback_to_template(dc, d, rs)
            if performed:
                dc.event(d, "Normal", ROLLBACK_DONE,
                         f'Rolled back deployment "{meta(d).get("name", "")}" to revision {target}')
            return d
    dc.event(d, "Warning", ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.")
    return await update_deployment_and_clear_rollback_to(dc, d)


async def rollback_to_template(dc: DeploymentControl, d: Obj, rs: Obj) -> tuple[bool, Obj]:
    """Give ``d`` the ReplicaSet's template and annotations unless they are equal; whether it changed, and the
    Deployment as it now is."""
    performed = False
    if not equal_ignore_hash((d.get("spec") or {}).get("template"), (rs.get("spec") or {}).get("template")):
        dc.log.debug("rolling back deployment to old template spec", deployment=meta(d).get("name"))
        updated = set_from_replica_set_template(d, deep_copy((rs.get("spec") or {}).get("template") or {}))
        # Take the RS's annotations too (e.g. its change-cause), or the Deployment's current ones would be
        # copied onto the RS we roll back to.
        d = set_deployment_annotations_to(updated, rs)
        performed = True
    else:
        dc.log.debug("rolling back to a revision that contains the same template as current deployment, skipping",
                     deployment=meta(d).get("name"))
        dc.event(d, "Warning", ROLLBACK_TEMPLATE_UNCHANGED,
                 f'The rollback revision contains the same template as current deployment "{meta(d).get("name", "")}"')
    return performed, await update_deployment_and_clear_rollback_to(dc, d)


async def update_deployment_and_clear_rollback_to(dc: DeploymentControl, d: Obj) -> Obj:
    """Write ``d`` without its rollback request; returns the Deployment as it now is."""
    dc.log.debug("cleans up rollbackTo of deployment", deployment=meta(d).get("name"))
    return await dc.update_deployment(set_rollback_to(d, None))
