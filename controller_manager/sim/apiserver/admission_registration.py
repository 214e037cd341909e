"""admissionregistration.k8s.io/v1 kinds: ValidatingWebhookConfiguration, MutatingWebhookConfiguration,
ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding defaults and validation
(``pkg/apis/admissionregistration/v1/defaults.go``, ``pkg/apis/admissionregistration/validation``).

The webhooks are called by :mod:`webhooks`; no CEL expression is evaluated (policies are stored only, and
expressions are not compiled or type-checked either; an empty one is still refused).

Guarantees:
- Webhooks default ``failurePolicy: Fail``, ``matchPolicy: Equivalent``, ``namespaceSelector``/``objectSelector``
  ``{}``, ``timeoutSeconds: 10`` (mutating ones also ``reinvocationPolicy: Never``); rules default ``scope: "*"``;
  a service reference defaults ``port: 443``. A policy defaults ``failurePolicy: Fail``; match resources (a
  policy's ``matchConstraints``, a binding's ``matchResources``) default ``matchPolicy: Equivalent`` and empty
  selectors.
- Validation, with upstream's messages: webhook names fully qualified (three segments) and unique, ``sideEffects``
  required (None or NoneOnDryRun), ``admissionReviewVersions`` required and including v1 or v1beta1, timeouts of
  1 to 30 seconds, exactly one of ``clientConfig.url`` or ``service``, supported enum values; rules' operations,
  apiGroups, apiVersions and resources required; a policy's ``matchConstraints.resourceRules`` and
  ``validations`` or ``auditAnnotations`` required; a binding's ``policyName`` and ``validationActions``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller_manager.api.selectors import is_dns1123_subdomain
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
)

Obj = dict[str, Any]

_FAILURE_POLICIES = ("Fail", "Ignore")
_MATCH_POLICIES = ("Equivalent", "Exact")
_NO_SIDE_EFFECTS = ("None", "NoneOnDryRun")
_OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
_REINVOCATION = ("IfNeeded", "Never")
_SCOPES = ("*", "Cluster", "Namespaced")
_REVIEW_VERSIONS = ("v1", "v1beta1")
_ACTIONS = ("Audit", "Deny", "Warn")
_PARAM_NOT_FOUND = ("Allow", "Deny")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- defaults -------------------------------------------------------------------------------------------

def _rule_defaults(rules: Any) -> None:
    for rule in rules if isinstance(rules, list) else ():
        if isinstance(rule, dict) and rule.get("scope") is None:
            rule["scope"] = "*"


def _webhook_defaults(obj: Obj, mutating: bool) -> None:
    for hook in obj.get("webhooks") or ():
        if not isinstance(hook, dict):
            continue
        for key, value in (("failurePolicy", "Fail"), ("matchPolicy", "Equivalent"), ("timeoutSeconds", 10)):
            if hook.get(key) is None:
                hook[key] = value
        for key in ("namespaceSelector", "objectSelector"):
            if hook.get(key) is None:
                hook[key] = {}
        if mutating and hook.get("reinvocationPolicy") is None:
            hook["reinvocationPolicy"] = "Never"
        _rule_defaults(hook.get("rules"))
        service = _dict(hook.get("clientConfig")).get("service")
        if isinstance(service, dict) and service.get("port") is None:
            service["port"] = 443


def _match_resources_defaults(match: Any) -> None:
    if not isinstance(match, dict):
        return
    if match.get("matchPolicy") is None:
        match["matchPolicy"] = "Equivalent"
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            match[key] = {}
    _rule_defaults(match.get("resourceRules"))
    _rule_defaults(match.get("excludeResourceRules"))


def _policy_defaults(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("failurePolicy") is None:
        spec["failurePolicy"] = "Fail"
    _match_resources_defaults(spec.get("matchConstraints"))


def _binding_defaults(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    _match_resources_defaults(spec.get("matchResources"))


DEFAULTS: dict[str, Callable[[Obj], None]] = {
    "ValidatingWebhookConfiguration": lambda obj: _webhook_defaults(obj, mutating=False),
    "MutatingWebhookConfiguration": lambda obj: _webhook_defaults(obj, mutating=True),
    "ValidatingAdmissionPolicy": _policy_defaults,
    "ValidatingAdmissionPolicyBinding": _binding_defaults,
}


# --- validation -----------------------------------------------------------------------------------------

def _fully_qualified(name: Any, path: str) -> list[FieldError]:
    text = str(name or "")
    if not text:
        return [required(path)]
    text = text.removesuffix(".")
    problems = is_dns1123_subdomain(text)
    if problems:
        return [invalid(path, text, ",".join(problems))]
    if len(text.split(".")) < 3:
        return [invalid(path, text, "should be a domain with at least three segments separated by dots")]
    return []


def _rule(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    operations = list(rule.get("operations") or ())
    if not operations:
        errs.append(required(f"{path}.operations"))
    for i, op in enumerate(operations):
        if op not in _OPERATIONS:
            errs.append(not_supported(f"{path}.operations[{i}]", op, _OPERATIONS))
    for key in ("apiGroups", "apiVersions", "resources"):
        if not rule.get(key):
            errs.append(required(f"{path}.{key}"))
    for i, resource in enumerate(rule.get("resources") or ()):
        if not resource:
            errs.append(required(f"{path}.resources[{i}]"))
    scope = rule.get("scope")
    if scope is not None and scope not in _SCOPES:
        errs.append(not_supported(f"{path}.scope", scope, _SCOPES))
    return errs


def _review_versions(versions: list[Any], path: str) -> list[FieldError]:
    if not versions:
        return [required(path, "must specify one of " + ", ".join(_REVIEW_VERSIONS))]
    errs: list[FieldError] = []
    seen: set[Any] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errs.append(invalid(f"{path}[{i}]", version, "duplicate version"))
        seen.add(version)
    if not seen & set(_REVIEW_VERSIONS):
        errs.append(invalid(path, versions, "must include at least one of " + ", ".join(_REVIEW_VERSIONS)))
    return errs


def _client_config(config: Mapping[str, Any], path: str) -> list[FieldError]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:  # (its https scheme and form are not checked here)
        return []
    svc = _dict(service)
    errs: list[FieldError] = []
    if not svc.get("name"):
        errs.append(required(f"{path}.service.name", "service name is required"))
    if not svc.get("namespace"):
        errs.append(required(f"{path}.service.namespace", "service namespace is required"))
    port = svc.get("port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        errs.append(invalid(f"{path}.service.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    return errs


def webhook_configuration_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                                 mutating: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, raw in enumerate(obj.get("webhooks") or ()):
        hook = _dict(raw)
        path = f"webhooks[{i}]"
        errs.extend(_fully_qualified(hook.get("name"), f"{path}.name"))
        for j, rule in enumerate(hook.get("rules") or ()):
            errs.extend(_rule(_dict(rule), f"{path}.rules[{j}]"))
        for key, allowed in (("failurePolicy", _FAILURE_POLICIES), ("matchPolicy", _MATCH_POLICIES)):
            if hook.get(key) is not None and hook[key] not in allowed:
                errs.append(not_supported(f"{path}.{key}", hook[key], allowed))
        side_effects = hook.get("sideEffects")
        if side_effects is None:
            errs.append(required(f"{path}.sideEffects", "must specify one of " + ", ".join(_NO_SIDE_EFFECTS)))
        elif side_effects not in _NO_SIDE_EFFECTS:
            errs.append(not_supported(f"{path}.sideEffects", side_effects, _NO_SIDE_EFFECTS))
        timeout = hook.get("timeoutSeconds")
        if isinstance(timeout, int) and not 1 <= timeout <= 30:
            errs.append(invalid(f"{path}.timeoutSeconds", timeout,
                                "the timeout value must be between 1 and 30 seconds"))
        reinvocation = hook.get("reinvocationPolicy")
        if mutating and reinvocation is not None and reinvocation not in _REINVOCATION:
            errs.append(not_supported(f"{path}.reinvocationPolicy", reinvocation, _REINVOCATION))
        errs.extend(_client_config(_dict(hook.get("clientConfig")), f"{path}.clientConfig"))
        errs.extend(_match_conditions(hook.get("matchConditions"), f"{path}.matchConditions"))
        errs.extend(_review_versions(list(hook.get("admissionReviewVersions") or ()),
                                     f"{path}.admissionReviewVersions"))
        name = str(hook.get("name") or "")
        if name and name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
    return errs


def _match_conditions(conditions: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, raw in enumerate(conditions if isinstance(conditions, list) else ()):
        condition = _dict(raw)
        if not str(condition.get("expression") or "").strip():
            errs.append(required(f"{path}[{i}].expression"))
        name = str(condition.get("name") or "")
        if not name:
            errs.append(required(f"{path}[{i}].name"))
        elif name in names:
            errs.append(duplicate(f"{path}[{i}].name", name))
        names.add(name)
    return errs


def _match_resources(match: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    policy = match.get("matchPolicy")
    if policy is None:
        errs.append(required(f"{path}.matchPolicy"))
    elif policy not in _MATCH_POLICIES:
        errs.append(not_supported(f"{path}.matchPolicy", policy, _MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errs.append(required(f"{path}.{key}"))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or ()):
            errs.extend(_rule(_dict(rule), f"{path}.{key}[{i}]"))
    return errs


def policy_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    failure = spec.get("failurePolicy")
    if failure is None:
        errs.append(required("spec.failurePolicy"))
    elif failure not in _FAILURE_POLICIES:
        errs.append(not_supported("spec.failurePolicy", failure, _FAILURE_POLICIES))
    param_kind = spec.get("paramKind")
    if param_kind is not None:
        for key in ("apiVersion", "kind"):
            if not _dict(param_kind).get(key):
                errs.append(required(f"spec.paramKind.{key}"))
    match = spec.get("matchConstraints")
    if match is None:
        errs.append(required("spec.matchConstraints"))
    else:
        errs.extend(_match_resources(_dict(match), "spec.matchConstraints"))
        if not _dict(match).get("resourceRules"):
            errs.append(required("spec.matchConstraints.resourceRules"))
    errs.extend(_match_conditions(spec.get("matchConditions"), "spec.matchConditions"))
    validations = list(spec.get("validations") or ())
    if not validations and not spec.get("auditAnnotations"):
        detail = "validations or auditAnnotations must contain at least one item"
        errs.append(required("spec.validations", detail))
        errs.append(required("spec.auditAnnotations", detail))
    for i, raw in enumerate(validations):
        if not str(_dict(raw).get("expression") or "").strip():
            errs.append(required(f"spec.validations[{i}].expression", "expression is not specified"))
    return errs


def policy_binding_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    if not spec.get("policyName"):
        errs.append(required("spec.policyName"))
    param_ref = spec.get("paramRef")
    if param_ref is not None:
        action = _dict(param_ref).get("parameterNotFoundAction")
        if action is None:
            errs.append(required("spec.paramRef.parameterNotFoundAction"))
        elif action not in _PARAM_NOT_FOUND:
            errs.append(not_supported("spec.paramRef.parameterNotFoundAction", action, _PARAM_NOT_FOUND))
    if spec.get("matchResources") is not None:
        errs.extend(_match_resources(_dict(spec["matchResources"]), "spec.matchResources"))
    actions = list(spec.get("validationActions") or ())
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in _ACTIONS:
            errs.append(not_supported(f"spec.validationActions[{i}]", action, _ACTIONS))
        if action in seen:
            errs.append(duplicate(f"spec.validationActions[{i}]", action))
        seen.add(str(action))
    if "Deny" in seen and "Warn" in seen:
        errs.append(invalid("spec.validationActions", actions,
                            "must not contain both Deny and Warn (repeating the same validation failure "
                            "information in the API response and headers serves no purpose)"))
    if not seen:
        errs.append(required("spec.validationActions", "at least one validation action is required"))
    return errs


