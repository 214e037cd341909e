"""Validation of object metadata, pod specs and pod templates (pkg/apis/core/validation, objectmeta.go).

Covers what clients and controllers run into: names (DNS-1123 subdomain or label per kind, and
generateName), labels, annotations, ownerReferences, finalizers, metadata immutability, the
PodSpec basics (containers present, unique DNS-label names, image, ports, restartPolicy, dnsPolicy,
tolerations, activeDeadlineSeconds) and the Pod update rule (only images, activeDeadlineSeconds,
terminationGracePeriodSeconds, schedulingGates and added tolerations may change).
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from controller_manager.api.selectors import (
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_key,
    is_label_value,
)
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    duplicate,
    forbidden,
    go_json,
    invalid,
    not_supported,
    required,
)

Obj = Mapping[str, Any]
NameFn = Callable[[str, bool], list[str]]
ANNOTATIONS_MAX_BYTES = 256 * 1024
MAX_INT32 = 2**31 - 1
_STANDARD_FINALIZERS = ("kubernetes", "orphan", "foregroundDeletion")


def _mask_trailing_dash(name: str) -> str:
    # A generateName prefix may end in "-": the random suffix follows it.
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def _dict(value: Any) -> Obj:
    # (a plain dict, nearly always, spares the Mapping ABC's instance check)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- metadata -----------------------------------------------------------------------------------------

# Label keys and values repeat across every object one template makes: their checks are remembered.
@functools.lru_cache(maxsize=8192)
def _label_key_messages(key: str) -> tuple[str, ...]:
    return tuple(is_label_key(key))


@functools.lru_cache(maxsize=8192)
def _label_value_messages(value: str) -> tuple[str, ...]:
    return tuple(is_label_value(value))


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, value in sorted(_dict(labels).items()):
        errs.extend(invalid(path, key, msg) for msg in _label_key_messages(str(key)))
        errs.extend(invalid(path, value, msg) for msg in _label_value_messages(str(value)))
    return errs


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    total = 0
    for key, value in sorted(_dict(annotations).items()):
        errs.extend(invalid(path, key, msg) for msg in _label_key_messages(str(key).lower()))
        total += len(str(key).encode()) + len(str(value).encode())
    if total > ANNOTATIONS_MAX_BYTES:
        errs.append(FieldError("FieldValueTooLong", path, f"may not be more than {ANNOTATIONS_MAX_BYTES} bytes"))
    return errs


def validate_object_meta(meta: Any, namespaced: bool, name_fn: NameFn) -> list[FieldError]:
    m = _dict(meta)
    errs: list[FieldError] = []
    generate_name = str(m.get("generateName") or "")
    if generate_name:
        errs.extend(invalid("metadata.generateName", generate_name, msg) for msg in name_fn(generate_name, True))
    name = str(m.get("name") or "")
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        errs.extend(invalid("metadata.name", name, msg) for msg in name_fn(name, False))
    namespace = str(m.get("namespace") or "")
    if namespaced:
        if not namespace:
            errs.append(required("metadata.namespace"))
        else:
            errs.extend(invalid("metadata.namespace", namespace, msg) for msg in name_is_dns_label(namespace, False))
    elif namespace:
        errs.append(forbidden("metadata.namespace", "not allowed on this type"))
    errs.extend(validate_labels(m.get("labels"), "metadata.labels"))
    errs.extend(validate_annotations(m.get("annotations"), "metadata.annotations"))
    errs.extend(_owner_references(m.get("ownerReferences")))
    errs.extend(_finalizers(m.get("finalizers")))
    return errs


_BANNED_OWNERS = {("", "v1", "Event")}


def _owner_reference_json(ref: Mapping[str, Any]) -> dict[str, Any]:
    """A metav1.OwnerReference in its JSON field order, ``controller``/``blockOwnerDeletion`` when set."""
    out: dict[str, Any] = {key: str(ref.get(key) or "") for key in ("apiVersion", "kind", "name", "uid")}
    for key in ("controller", "blockOwnerDeletion"):
        if ref.get(key) is not None:
            out[key] = bool(ref[key])
    return out


def _owner_references(refs: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    first_controller = ""
    path = "metadata.ownerReferences"
    for i, ref in enumerate(_list(refs)):
        r = _dict(ref)
        api_version = str(r.get("apiVersion") or "")
        group, _, version = api_version.rpartition("/")
        if not api_version:
            errs.append(required(f"{path}[{i}].apiVersion", "must not be empty"))
        elif not version or api_version.count("/") > 1:
            errs.append(invalid(f"{path}[{i}].apiVersion", api_version, "must be <group>/<version> or <version>"))
        for key in ("kind", "name", "uid"):
            if not r.get(key):
                errs.append(required(f"{path}[{i}].{key}", "must not be empty"))
        kind = str(r.get("kind") or "")
        if (group, version, kind) in _BANNED_OWNERS:
            gvk = f"{group}/{version}, Kind={kind}"
            errs.append(invalid(f"{path}[{i}]", GoRepr(go_json(_owner_reference_json(r), sort_keys=False)),
                                f"{gvk} is disallowed from being an owner"))
        if r.get("controller") is True:
            current = f"{kind}/{r.get('name') or ''}"
            if first_controller:
                shown = [_owner_reference_json(_dict(x)) for x in _list(refs)]
                errs.append(invalid(path, GoRepr(go_json(shown, sort_keys=False)),
                                    "Only one reference can have Controller set to true. Found \"true\" in "
                                    f"references for {first_controller} and {current}"))
            else:
                first_controller = current
    return errs


def _finalizers(finalizers: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    values = [str(f) for f in _list(finalizers)]
    for f in values:
        msgs = is_label_key(f)
        if msgs:
            errs.extend(invalid("metadata.finalizers", f, msg) for msg in msgs)
        elif f not in _STANDARD_FINALIZERS and "/" not in f:
            errs.append(invalid("metadata.finalizers", f,
                                "name is neither a standard finalizer name nor is it fully qualified"))
    if "orphan" in values and "foregroundDeletion" in values:
        errs.append(invalid("metadata.finalizers", values,
                            "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_object_meta_update(new: Any, old: Any) -> list[FieldError]:
    n, o = _dict(new), _dict(old)
    errs: list[FieldError] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        if n.get(key) != o.get(key) and o.get(key) is not None:
            errs.append(invalid(f"metadata.{key}", n.get(key), "field is immutable"))
    if n.get("deletionTimestamp") is not None:
        added = [f for f in _list(n.get("finalizers")) if f not in _list(o.get("finalizers"))]
        if added:
            errs.append(forbidden("metadata.finalizers", "no new finalizers can be added if the object is being "
                                  f"deleted, found new finalizers {_go_strings(added)}"))
    return errs


def _go_strings(values: list[Any]) -> str:
    return "[]string{" + ", ".join(json.dumps(str(v)) for v in values) + "}"


# --- pod spec -----------------------------------------------------------------------------------------

_PROTOCOLS = ("TCP", "UDP", "SCTP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_restart_policy(policy: Any, path: str) -> list[FieldError]:
    if policy in _RESTART_POLICIES:
        return []
    if not policy:
        return [required(path)]
    return [not_supported(path, policy, _RESTART_POLICIES)]


def _port_name_errors(name: str) -> list[str]:
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not name or any(not (c.islower() or c.isdigit() or c == "-") or not c.isascii() for c in name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not any("a" <= c <= "z" for c in name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _container(c: Obj, path: str, names: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str(c.get("name") or "")
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        errs.extend(invalid(f"{path}.name", name, msg) for msg in is_dns1123_label(name))
        if name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    if not c.get("image"):
        errs.append(required(f"{path}.image"))
    policy = c.get("imagePullPolicy")
    if policy and policy not in _PULL_POLICIES:
        errs.append(not_supported(f"{path}.imagePullPolicy", policy, _PULL_POLICIES))
    port_names: set[str] = set()
    for i, port in enumerate(_list(c.get("ports"))):
        p = _dict(port)
        ppath = f"{path}.ports[{i}]"
        pname = p.get("name")
        if pname:
            errs.extend(invalid(f"{ppath}.name", pname, msg) for msg in _port_name_errors(str(pname)))
            if pname in port_names:
                errs.append(duplicate(f"{ppath}.name", pname))
            port_names.add(str(pname))
        cport = p.get("containerPort")
        if cport is None or cport == 0:
            errs.append(required(f"{ppath}.containerPort"))
        elif not isinstance(cport, int) or not 1 <= cport <= 65535:
            errs.append(invalid(f"{ppath}.containerPort", cport, "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol")
        if not proto:
            errs.append(required(f"{ppath}.protocol"))
        elif proto not in _PROTOCOLS:
            errs.append(not_supported(f"{ppath}.protocol", proto, _PROTOCOLS))
    for i, env in enumerate(_list(c.get("env"))):
        if not _dict(env).get("name"):
            errs.append(required(f"{path}.env[{i}].name"))
    return errs


def validate_tolerations(tolerations: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, t in enumerate(_list(tolerations)):
        tol = _dict(t)
        tpath = f"{path}[{i}]"
        key = str(tol.get("key") or "")
        if key:
            errs.extend(invalid(f"{tpath}.key", key, msg) for msg in _label_key_messages(key))
        operator = tol.get("operator") or "Equal"
        if not key and operator != "Exists":
            errs.append(invalid(f"{tpath}.operator", operator, "operator must be Exists when `key` is empty, which "
                                'means "match all values and all keys"'))
        if operator == "Exists" and tol.get("value"):
            errs.append(invalid(f"{tpath}.operator", tol.get("value"),
                                "value must be empty when `operator` is 'Exists'"))
        elif operator not in ("Equal", "Exists"):
            errs.append(not_supported(f"{tpath}.operator", operator, ("Equal", "Exists")))
        effect = tol.get("effect") or ""
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{tpath}.effect", effect,
                                "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if effect and effect not in _EFFECTS:
            errs.append(not_supported(f"{tpath}.effect", effect, _EFFECTS))
    return errs


def validate_pod_spec(spec: Any, path: str) -> list[FieldError]:
    s = _dict(spec)
    errs: list[FieldError] = []
    volume_names: set[str] = set()
    for i, v in enumerate(_list(s.get("volumes"))):
        vname = str(_dict(v).get("name") or "")
        vpath = f"{path}.volumes[{i}].name"
        if not vname:
            errs.append(required(vpath))
        else:
            errs.extend(invalid(vpath, vname, msg) for msg in is_dns1123_label(vname))
            if vname in volume_names:
                errs.append(duplicate(vpath, vname))
            volume_names.add(vname)
    names: set[str] = set()
    for i, c in enumerate(_list(s.get("initContainers"))):
        errs.extend(_container(_dict(c), f"{path}.initContainers[{i}]", names))
    containers = _list(s.get("containers"))
    if not containers:
        errs.append(required(f"{path}.containers"))
    for i, c in enumerate(containers):
        errs.extend(_container(_dict(c), f"{path}.containers[{i}]", names))
    errs.extend(validate_restart_policy(s.get("restartPolicy"), f"{path}.restartPolicy"))
    dns = s.get("dnsPolicy")
    if not dns:
        errs.append(required(f"{path}.dnsPolicy"))
    elif dns not in _DNS_POLICIES:
        errs.append(not_supported(f"{path}.dnsPolicy", dns, _DNS_POLICIES))
    deadline = s.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or not 1 <= deadline <= MAX_INT32):
        errs.append(invalid(f"{path}.activeDeadlineSeconds", deadline,
                            f"must be between 1 and {MAX_INT32}, inclusive"))
    node_name = s.get("nodeName")
    if node_name:
        errs.extend(invalid(f"{path}.nodeName", node_name, m) for m in is_dns1123_subdomain(str(node_name)))
    sa = s.get("serviceAccountName")
    if sa:
        errs.extend(invalid(f"{path}.serviceAccountName", sa, m) for m in is_dns1123_subdomain(str(sa)))
    errs.extend(validate_labels(s.get("nodeSelector"), f"{path}.nodeSelector"))
    errs.extend(validate_tolerations(s.get("tolerations"), f"{path}.tolerations"))
    for key in ("hostname", "subdomain"):
        if s.get(key):
            errs.extend(invalid(f"{path}.{key}", s[key], m) for m in is_dns1123_label(str(s[key])))
    grace = s.get("terminationGracePeriodSeconds")
    if grace is not None and not isinstance(grace, int):
        errs.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be an integer"))
    return errs


def validate_pod_template(template: Any, path: str) -> list[FieldError]:
    """ValidatePodTemplateSpec: template labels are reported at ``<path>.labels``, as upstream does."""
    t = _dict(template)
    meta = _dict(t.get("metadata"))
    errs = validate_labels(meta.get("labels"), f"{path}.labels")
    errs.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    spec = _dict(t.get("spec"))
    errs.extend(validate_pod_spec(spec, f"{path}.spec"))
    if spec.get("ephemeralContainers"):
        errs.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return errs


# --- pod update ---------------------------------------------------------------------------------------

_POD_UPDATE_MSG = ("pod updates may not change fields other than `spec.containers[*].image`,"
                   "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                   "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                   "(allow it to be set to 1 if it was previously negative)")


def validate_pod_update(new_spec: Any, old_spec: Any) -> list[FieldError]:
    new, old = _dict(new_spec), _dict(old_spec)
    errs: list[FieldError] = []
    old_deadline, new_deadline = old.get("activeDeadlineSeconds"), new.get("activeDeadlineSeconds")
    if old_deadline is not None:
        if new_deadline is None:
            errs.append(invalid("spec.activeDeadlineSeconds", None,
                                "must not update from a positive integer to nil value"))
        elif isinstance(new_deadline, int) and new_deadline > old_deadline:
            errs.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                                "must be less than or equal to previous value"))
    new_tolerations = [_without_seconds(t) for t in _list(new.get("tolerations"))]
    if any(_without_seconds(t) not in new_tolerations for t in _list(old.get("tolerations"))):
        errs.append(forbidden("spec.tolerations",
                              "existing toleration can not be modified except its tolerationSeconds"))
    munged = dict(new)
    for key in ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "schedulingGates", "tolerations"):
        munged.pop(key, None)
    base = {k: v for k, v in old.items() if k not in ("activeDeadlineSeconds", "terminationGracePeriodSeconds",
                                                       "schedulingGates", "tolerations")}
    for key in ("containers", "initContainers"):
        old_list, new_list = _list(old.get(key)), _list(munged.get(key))
        if key in munged and len(old_list) == len(new_list):
            munged[key] = [_with_image_of(n, o) for n, o in zip(new_list, old_list, strict=True)]
    if munged != base:
        errs.append(forbidden("spec", _POD_UPDATE_MSG + "\n" + _diff(base, munged)))
    return errs


def _with_image_of(new: Any, old: Any) -> dict[str, Any]:
    out = {k: v for k, v in _dict(new).items() if k != "image"}
    if "image" in _dict(old):
        out["image"] = _dict(old)["image"]
    return out


def _without_seconds(toleration: Any) -> dict[str, Any]:
    return {k: v for k, v in _dict(toleration).items() if k != "tolerationSeconds"}


def _diff(old: Obj, new: Obj) -> str:
    a = json.dumps(old, indent=1, sort_keys=True).splitlines()
    b = json.dumps(new, indent=1, sort_keys=True).splitlines()
    return "\n".join(line for line in difflib.unified_diff(a, b, lineterm="", n=1) if not line.startswith(("---",
                                                                                                           "+++")))
