"""Query-parameter options checked as the handlers check them before doing any work.

Guarantees:
- ``dryRun`` may only hold ``All`` (``ValidateDryRun``); anything else is the 422 the handler builds with
  ``NewInvalid`` for its options kind: ``CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported
  value: ["x"]: supported values: "All"``.
- :func:`list_options` reads a list or watch request's options, applies ``SetListOptionsDefaults`` (the
  WatchList feature is on in 1.37: a watch from ``""`` or ``"0"`` without sendInitialEvents or
  resourceVersionMatch is served as sendInitialEvents=true, NotOlderThan, so a client that allows
  bookmarks gets the initial-events-end bookmark) and then ``ValidateListOptions``, whose failures are
  422 ``ListOptions.meta.k8s.io "" is invalid: ...`` with one cause per error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver import validation_errors as fe

META_GROUP = "meta.k8s.io"
DRY_RUN_ALL = "All"
EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"


def _invalid(kind: str, errs: list[fe.FieldError]) -> errors.StatusError:
    return errors.StatusError(fe.invalid_status((META_GROUP, kind), "", errs))


def dry_run(query: Any, options_kind: str) -> bool:
    """Whether the request is a dry run; ``options_kind`` names the verb's options (CreateOptions, ...)."""
    values = [str(v) for v in query.getall("dryRun", [])]
    if any(v != DRY_RUN_ALL for v in values):
        # field.NotSupported with a []string bad value: ErrorBody prints it as JSON.
        bad = fe.GoRepr(json.dumps(values, separators=(",", ":"), ensure_ascii=False))
        raise _invalid(options_kind, [fe.not_supported("dryRun", bad, [DRY_RUN_ALL])])
    return bool(values)


def _parse_bool(query: Any, name: str) -> bool | None:
    """A boolean query parameter as the parameter codec reads it (strconv.ParseBool); absent is None."""
    raw = query.get(name)
    if raw is None:
        return None
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if raw in ("", "0", "f", "F", "FALSE", "false", "False"):
        return False
    raise errors.bad_request(f'strconv.ParseBool: parsing "{raw}": invalid syntax')


parse_bool = _parse_bool  # (for other options read from a query: a pod log's follow and previous)


@dataclass(frozen=True)
class ListOptions:
    watch: bool
    resource_version: str
    resource_version_match: str
    continue_token: str
    send_initial_events: bool | None
    allow_watch_bookmarks: bool


def list_options(query: Any, *, watch: bool) -> ListOptions:
    """The list/watch options of a request (``watch``: the request is a watch, by path or parameter)."""
    rv = query.get("resourceVersion") or ""
    match = query.get("resourceVersionMatch") or ""
    send_initial = _parse_bool(query, "sendInitialEvents")
    bookmarks = bool(_parse_bool(query, "allowWatchBookmarks"))
    # Defaulting and validation look at the watch parameter only: a /watch/ path alone counts as a list.
    watch_param = bool(_parse_bool(query, "watch"))
    if watch_param and send_initial is None and not match and rv in ("", "0"):
        send_initial, match = True, NOT_OLDER_THAN
    opts = ListOptions(watch, rv, match, query.get("continue") or "", send_initial, bookmarks)
    errs = _watch_errors(opts) if watch_param else _list_errors(opts)
    if errs:
        raise _invalid("ListOptions", errs)
    return opts


def _list_errors(opts: ListOptions) -> list[fe.FieldError]:
    errs: list[fe.FieldError] = []
    match = opts.resource_version_match
    if match:
        if not opts.resource_version:
            errs.append(fe.forbidden("resourceVersionMatch",
                                     "resourceVersionMatch is forbidden unless resourceVersion is provided"))
        if opts.continue_token:
            errs.append(fe.forbidden("resourceVersionMatch",
                                     "resourceVersionMatch is forbidden when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            errs.append(fe.not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and opts.resource_version == "0":
            errs.append(fe.forbidden("resourceVersionMatch",
                                     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
    if opts.send_initial_events is not None:
        errs.append(fe.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errs


def _watch_errors(opts: ListOptions) -> list[fe.FieldError]:
    errs: list[fe.FieldError] = []
    match = opts.resource_version_match
    if opts.send_initial_events is not None and match != NOT_OLDER_THAN:
        errs.append(fe.forbidden("resourceVersionMatch",
                                 f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
    if match:
        if opts.send_initial_events is None:
            errs.append(fe.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                                                             "sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            errs.append(fe.not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
        if opts.continue_token:
            errs.append(fe.forbidden("resourceVersionMatch",
                                     "resourceVersionMatch is forbidden when continue is provided"))
    return errs
