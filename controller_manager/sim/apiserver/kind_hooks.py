"""Registry steps of some kinds that need the server's clock, run right after :mod:`strategy`'s
PrepareForCreate/PrepareForUpdate: a PersistentVolume's phase transition time, a CertificateSigningRequest's
write paths and condition timestamps (see :mod:`storage_kinds` and :mod:`certificates`)."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import certificates, storage_kinds

Obj = dict[str, Any]


def before_create(res: Resource, obj: Obj, now: str) -> Obj:
    if res.group == "" and res.kind == "PersistentVolume":
        return storage_kinds.prepare_pv(obj, None, now)
    if res.group == "certificates.k8s.io" and res.kind == "CertificateSigningRequest":
        return certificates.prepare(obj, None, None, now)
    return obj


def before_update(res: Resource, new: Obj, old: Obj, subresource: str | None, now: str) -> Obj:
    if res.group == "" and res.kind == "PersistentVolume" and subresource == "status":
        return storage_kinds.prepare_pv(new, old, now)
    if res.group == "certificates.k8s.io" and res.kind == "CertificateSigningRequest":
        return certificates.prepare(new, old, subresource, now)
    return new
