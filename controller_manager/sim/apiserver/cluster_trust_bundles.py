"""certificates.k8s.io/v1 ClusterTrustBundles (GA in 1.37): validation as ``pkg/apis/certificates/validation``
does it.

Guarantees:
- The name: with ``spec.signerName`` it starts with the signer name (``/`` written ``:``) and a ``:``, without
  one it holds no ``:``; the rest is a DNS subdomain.
- ``spec.signerName`` is a fully qualified signer name and may not change.
- ``spec.trustBundle`` is PEM ``CERTIFICATE`` blocks only, without headers, each an X.509 CA certificate, none
  twice, at least one; with upstream's messages (the bundle itself is never echoed: ``<value omitted>``).
- Not simulated: the ClusterTrustBundleAttest admission plugin (the ``attest`` verb on ``signers``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from cryptography import x509

from controller_manager.api.selectors import is_dns1123_subdomain
from controller_manager.sim.apiserver.certificates import signer_name_errors
from controller_manager.sim.apiserver.validation_errors import FieldError, invalid

_OMITTED = "<value omitted>"
_BLOCK = re.compile(r"-----BEGIN ([^-\n]*)-----\n(.*?)-----END \1-----", re.S)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def name_errors(signer: str) -> Any:
    """The name check for a bundle of ``signer`` (a validation.NameFn)."""
    def check(name: str, prefix: bool) -> list[str]:
        if not signer:
            if ":" in name:
                return ['ClusterTrustBundle without signer name must not have ":" in its name']
            return is_dns1123_subdomain(name)
        required_prefix = signer.replace("/", ":") + ":"
        if not name.startswith(required_prefix):
            return [f"ClusterTrustBundle for signerName {signer} must be named with prefix {required_prefix}"]
        return is_dns1123_subdomain(name.removeprefix(required_prefix))
    return check


def _trust_bundle_errors(bundle: str) -> list[FieldError]:
    path = "spec.trustBundle"
    errs: list[FieldError] = []
    seen: dict[bytes, list[int]] = {}
    for i, block in enumerate(_BLOCK.finditer(bundle)):
        kind, body = block.group(1), block.group(2)
        if kind != "CERTIFICATE":
            errs.append(invalid(path, _OMITTED, f"entry {i} has bad block type: {kind}"))
            continue
        if ":" in body.split("\n\n")[0] and "\n\n" in body:
            errs.append(invalid(path, _OMITTED, f"entry {i} has PEM block headers"))
            continue
        try:
            der = base64.b64decode("".join(body.split()), validate=True)
            cert = x509.load_der_x509_certificate(der)
        except (binascii.Error, ValueError):
            errs.append(invalid(path, _OMITTED, f"entry {i} does not parse as X.509"))
            continue
        try:
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            constraints = None
        if constraints is None or not constraints.ca:
            errs.append(invalid(path, _OMITTED, f"entry {i} does not have the CA bit set"))
            continue
        seen.setdefault(der, []).append(i)
    if not errs and not seen:
        errs.append(invalid(path, _OMITTED, "at least one trust anchor must be provided"))
    for indices in seen.values():
        if len(indices) > 1:
            errs.append(invalid(path, _OMITTED, f"duplicate trust anchor (indices [{' '.join(map(str, indices))}])"))
    return errs


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    signer = str(spec.get("signerName") or "")
    errs: list[FieldError] = []
    if signer:
        errs.extend(signer_name_errors(signer))
    if old is not None and signer != str(_dict(old.get("spec")).get("signerName") or ""):
        errs.append(invalid("spec.signerName", signer, "changing signerName is forbidden"))
    errs.extend(_trust_bundle_errors(str(spec.get("trustBundle") or "")))
    return errs
