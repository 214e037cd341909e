"""The only code that speaks HTTP to an API server.

``load_config`` finds the server and credentials (kubeconfig or in-cluster); ``ApiClient`` offers
raw-JSON verbs for any resource (get, list, watch, create, update, patch, delete, /status, /scale,
discovery) with client-side rate limiting, bounded retries and client-go's metrics; failures raise
the typed errors of :mod:`controller_manager.client.errors`.
"""

from controller_manager.client.config import ClientConfig, load_config
from controller_manager.client.errors import (
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    BadRequest,
    ConfigError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    WriteFenced,
)
from controller_manager.client.rest import ApiClient
from controller_manager.client.watch import WatchEvent, WatchStream

__all__ = [
    "AlreadyExists",
    "ApiClient",
    "ApiConnectionError",
    "ApiError",
    "BadRequest",
    "ClientConfig",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "WatchEvent",
    "WatchStream",
    "WriteFenced",
    "load_config",
]
