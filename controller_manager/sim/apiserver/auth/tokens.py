"""ServiceAccount tokens: signed JWTs with the claims kube-apiserver issues (pkg/serviceaccount/claims.go).

Guarantees:
- Tokens are ES256 JWTs signed with a P-256 key made when the first token is issued; the header names the
  key (``kid``: the unpadded base64url SHA-256 of its DER public key), as kube-apiserver's signer does.
- Claims: ``aud``, ``exp``, ``iat``, ``nbf`` (= iat), ``iss`` (``https://kubernetes.default.svc.cluster.local``),
  ``jti`` (a fresh UUID), ``sub`` (``system:serviceaccount:<ns>:<name>``) and the private ``kubernetes.io``
  claim with ``namespace``, ``serviceaccount`` {name, uid} and, for a token bound to a Pod or Secret, that
  object {name, uid} (a Pod's ``node`` too when it is scheduled).
- :meth:`Signer.verify` checks signature, issuer and time, then that the ServiceAccount (and any bound object)
  still exists with the claimed uid; it returns the user or raises :class:`InvalidToken` with the validator's
  words (``service account token has expired``, ``service account UID (x) does not match claim (y)``).
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from controller_manager.api.resources import NODES, PODS, SECRETS, SERVICEACCOUNTS
from controller_manager.sim.apiserver.auth.users import User, service_account_user, service_account_username

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = (ISSUER,)
_EXTRA = "authentication.kubernetes.io/"
_COORDINATE = 32  # bytes of each of r and s in an ES256 signature


class InvalidToken(Exception):
    """A token that does not authenticate; the message is the validator's."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Binding:
    """The object a token is bound to (TokenRequest spec.boundObjectRef), resolved to its uid."""

    kind: str
    name: str
    uid: str
    node: tuple[str, str] | None = None  # a Pod's node: (name, uid)


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


class Signer:
    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._key: ec.EllipticCurvePrivateKey | None = None
        self._kid = ""

    def _private_key(self) -> ec.EllipticCurvePrivateKey:
        if self._key is None:
            self._key = ec.generate_private_key(ec.SECP256R1())
            der = self._key.public_key().public_bytes(serialization.Encoding.DER,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
            self._kid = _b64(hashlib.sha256(der).digest())
        return self._key

    def issue(self, service_account: Obj, audiences: list[str], expiration_seconds: int, now: float,
              binding: Binding | None = None) -> str:
        key = self._private_key()
        meta = service_account["metadata"]
        private: Obj = {"namespace": meta["namespace"]}
        if binding is not None:
            if binding.node is not None:
                private["node"] = {"name": binding.node[0], "uid": binding.node[1]}
            private[binding.kind.lower()] = {"name": binding.name, "uid": binding.uid}
        private["serviceaccount"] = {"name": meta["name"], "uid": meta["uid"]}
        iat = int(now)
        claims: Obj = {"aud": audiences, "exp": iat + expiration_seconds, "iat": iat, "iss": ISSUER,
                       "jti": str(uuid.uuid4()), "kubernetes.io": private, "nbf": iat,
                       "sub": service_account_username(meta["namespace"], meta["name"])}
        header = {"alg": "ES256", "kid": self._kid}
        signing_input = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims))}"
        der = key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(_COORDINATE, "big") + s.to_bytes(_COORDINATE, "big")
        return f"{signing_input}.{_b64(signature)}"

    def jwks(self) -> Obj:
        """The public key set (``/openid/v1/jwks``), as go-jose writes a JSONWebKey."""
        numbers = self._private_key().public_key().public_numbers()
        return {"keys": [{"use": "sig", "kty": "EC", "kid": self._kid, "crv": "P-256", "alg": "ES256",
                          "x": _b64(numbers.x.to_bytes(_COORDINATE, "big")),
                          "y": _b64(numbers.y.to_bytes(_COORDINATE, "big"))}]}

    def claims(self, token: str) -> Obj:
        """The verified claims of a token this signer issued; InvalidToken otherwise."""
        if self._key is None or not looks_like_jwt(token):
            raise InvalidToken("invalid bearer token")
        head, body, sig = token.split(".")
        try:
            header = orjson.loads(_unb64(head))
            claims = orjson.loads(_unb64(body))
            raw = _unb64(sig)
        except (ValueError, orjson.JSONDecodeError):
            raise InvalidToken("invalid bearer token") from None
        if not isinstance(header, dict) or header.get("alg") != "ES256" or len(raw) != 2 * _COORDINATE:
            raise InvalidToken("invalid bearer token")
        der = encode_dss_signature(int.from_bytes(raw[:_COORDINATE], "big"), int.from_bytes(raw[_COORDINATE:], "big"))
        try:
            self._key.public_key().verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise InvalidToken("invalid bearer token") from None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            raise InvalidToken("invalid bearer token")
        return claims

    def verify(self, token: str, audiences: tuple[str, ...], now: float) -> tuple[User, list[str]]:
        """The token's user and the audiences it was accepted for."""
        claims = self.claims(token)
        aud = claims.get("aud")
        aud_list = [aud] if isinstance(aud, str) else list(aud or ())
        matched = [a for a in audiences if a in aud_list]
        if not matched:
            raise InvalidToken("token audiences " + go_list(aud_list) + " is invalid for the target audiences "
                               + go_list(list(audiences)))
        if now >= float(claims.get("exp") or 0):
            raise InvalidToken("service account token has expired")
        if now < float(claims.get("nbf") or 0) - 60:
            raise InvalidToken("service account token is not valid yet")
        private = claims.get("kubernetes.io") or {}
        namespace = str(private.get("namespace") or "")
        sa_ref = private.get("serviceaccount") or {}
        sa = self.api.stored_object(SERVICEACCOUNTS, namespace, str(sa_ref.get("name") or ""))
        if sa is None:
            raise InvalidToken(f'serviceaccounts "{sa_ref.get("name")}" not found')
        if sa["metadata"]["uid"] != sa_ref.get("uid"):
            raise InvalidToken(f"service account UID ({sa['metadata']['uid']}) does not match claim "
                               f"({sa_ref.get('uid')})")
        extra: dict[str, tuple[str, ...]] = {}
        checks = [("pod", PODS), ("secret", SECRETS)]
        if not private.get("pod"):
            checks.append(("node", NODES))  # a pod-bound token's node is information, not a binding
        for kind, res in checks:
            ref = private.get(kind)
            if not ref:
                continue
            bound = self.api.stored_object(res, namespace if res.namespaced else None, str(ref.get("name") or ""))
            if bound is None:
                raise InvalidToken(f'{res.plural} "{ref.get("name")}" not found')
            if bound["metadata"]["uid"] != ref.get("uid"):
                raise InvalidToken(f"{kind.capitalize()} UID ({bound['metadata']['uid']}) does not match claim "
                                   f"({ref.get('uid')})")
        node = private.get("node") or {}
        if node:
            extra[f"{_EXTRA}node-name"] = (str(node.get("name")),)
            extra[f"{_EXTRA}node-uid"] = (str(node.get("uid")),)
        pod = private.get("pod") or {}
        if pod:
            extra[f"{_EXTRA}pod-name"] = (str(pod.get("name")),)
            extra[f"{_EXTRA}pod-uid"] = (str(pod.get("uid")),)
        if claims.get("jti"):
            extra[f"{_EXTRA}credential-id"] = (f"JTI={claims['jti']}",)
        user = service_account_user(namespace, sa["metadata"]["name"], sa["metadata"]["uid"],
                                    dict(sorted(extra.items())))
        return user, matched


def go_list(values: list[str]) -> str:
    """A string list as Go's %v prints it: ``[a b]``."""
    return "[" + " ".join(values) + "]"


class BindingError(Exception):
    """A boundObjectRef TokenRequest refuses: ``code`` 400, 404 or 409, ``resource`` and ``name`` for 404/409."""

    def __init__(self, code: int, message: str, resource: str = "", name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.resource = resource
        self.name = name


def resolve_binding(api: ApiServer, namespace: str, service_account: str, ref: Obj | None) -> Binding | None:
    """spec.boundObjectRef resolved against the store (a Pod of this ServiceAccount, a Secret or a Node)."""
    if not ref:
        return None
    kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
    api_version = str(ref.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    res = {"Pod": PODS, "Secret": SECRETS, "Node": NODES}.get(kind) if group == "" else None
    if res is None:
        raise BindingError(400, f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    obj = api.stored_object(res, namespace if res.namespaced else None, name)
    if obj is None:
        raise BindingError(404, "", res.plural, name)
    if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName") != service_account:
        raise BindingError(400, f'cannot bind token for serviceaccount "{service_account}" to pod running with '
                                "different serviceaccount name.")
    uid = str(obj["metadata"]["uid"])
    if ref.get("uid") and ref["uid"] != uid:
        raise BindingError(409, f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                                "record. The object might have been deleted and then recreated", kind, name)
    node: tuple[str, str] | None = None
    node_name = (obj.get("spec") or {}).get("nodeName") if kind == "Pod" else None
    if node_name:
        found = api.stored_object(NODES, None, str(node_name))
        if found is not None:
            node = (str(node_name), str(found["metadata"]["uid"]))
    return Binding(kind, name, uid, node)
