"""The JSON Schema of the chart's values (``charts/controller-manager/values.schema.json``).

Guarantees: every key of values.yaml is described, objects refuse unknown keys (a misspelt value fails
``helm install`` instead of being ignored), and ``controllers`` accepts exactly the controllers the chart
offers, each ``{enabled: bool}``. Free-form Kubernetes objects (resources, affinity, tolerations, env, ...)
are checked for shape only; the API server validates their contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_OBJECT = {"type": "object"}
_LIST_OF_OBJECTS = {"type": "array", "items": {"type": "object"}}


def _strict(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": sorted(properties), **extra}


def values_schema(controller_keys: Sequence[str]) -> dict[str, Any]:
    controllers = _strict({
        key: _strict({"enabled": {"type": "boolean", "description": f"Run {key}-controller."}})
        for key in controller_keys
    })
    controllers["required"] = []  # a values file may mention only the controllers it changes
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "controller-manager chart values",
        **_strict({
            "image": _strict({
                "repository": {"type": "string", "minLength": 1},
                "tag": {"type": "string"},
                "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            }),
            "imagePullSecrets": _LIST_OF_OBJECTS,
            "nameOverride": {"type": "string"},
            "fullnameOverride": {"type": "string"},
            "replicaCount": {"type": "integer", "minimum": 0},
            "controllers": controllers,
            "leaderElection": _strict({
                "enabled": {"type": "boolean"},
                "resourceName": {"type": "string", "minLength": 1},
                "namespace": {"type": "string"},
                "leaseDuration": _DURATION,
                "renewDeadline": _DURATION,
                "retryPeriod": _DURATION,
            }),
            "securePort": {"type": "integer", "minimum": 1, "maximum": 65535},
            "logFormat": {"enum": ["json", "text"]},
            "logVerbosity": {"type": "integer", "minimum": 0},
            "extraArgs": {
                "type": "object",
                "description": "flag name (without --) -> value",
                "propertyNames": {"pattern": "^[a-z0-9][a-z0-9-]*$", "not": {"const": "controllers"}},
                "additionalProperties": {"type": ["string", "number", "boolean"]},
            },
            "extraEnv": {"type": "array", "items": {"type": "object", "required": ["name"]}},
            "resources": _OBJECT,
            "nodeSelector": _STRING_MAP,
            "tolerations": _LIST_OF_OBJECTS,
            "affinity": _OBJECT,
            "priorityClassName": {"type": "string"},
            "podAnnotations": _STRING_MAP,
            "podLabels": _STRING_MAP,
            "serviceAccount": _strict({
                "create": {"type": "boolean"},
                "name": {"type": "string"},
                "annotations": _STRING_MAP,
            }),
            "rbac": _strict({"create": {"type": "boolean"}}),
            "service": _strict({
                "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                "annotations": _STRING_MAP,
            }),
            "serviceMonitor": _strict({
                "enabled": {"type": "boolean"},
                "interval": _DURATION,
                "scrapeTimeout": _DURATION,
                "labels": _STRING_MAP,
            }),
            "prometheusRule": _strict({
                "enabled": {"type": "boolean"},
                "labels": _STRING_MAP,
                "runbookBaseURL": {"type": "string", "minLength": 1},
                "thresholds": _strict({
                    "workQueueDepth": {"type": "number", "minimum": 0},
                    "workQueueLatencySeconds": {"type": "number", "minimum": 0},
                    "syncErrorsPerSecond": {"type": "number", "minimum": 0},
                    "eventLoopLagSeconds": {"type": "number", "minimum": 0},
                    "informerListsPer30m": {"type": "number", "minimum": 0},
                }),
            }),
            "grafanaDashboard": _strict({
                "enabled": {"type": "boolean"},
                "namespace": {"type": "string"},
                "labels": _STRING_MAP,
                "annotations": _STRING_MAP,
            }),
            "podDisruptionBudget": _strict({
                "enabled": {"type": "boolean"},
                "minAvailable": {"type": ["integer", "string"]},
            }),
        }),
    }
