"""API failures become the right typed error: from a Status body, from a bare HTTP code, over the wire."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ClientConfig
from controller_manager.client import errors as e
from tests.client.conftest import FakeApiServer, fail, reply

STATUS_TABLE = [
    pytest.param(400, "BadRequest", e.BadRequest, id="400-bad-request"),
    pytest.param(401, "Unauthorized", e.Unauthorized, id="401-unauthorized"),
    pytest.param(403, "Forbidden", e.Forbidden, id="403-forbidden"),
    pytest.param(404, "NotFound", e.NotFound, id="404-not-found"),
    pytest.param(405, "MethodNotAllowed", e.MethodNotAllowed, id="405-method-not-allowed"),
    pytest.param(406, "NotAcceptable", e.ApiError, id="406-not-acceptable-generic"),
    pytest.param(409, "Conflict", e.Conflict, id="409-conflict"),
    pytest.param(409, "AlreadyExists", e.AlreadyExists, id="409-already-exists"),
    pytest.param(410, "Gone", e.Gone, id="410-gone"),
    pytest.param(410, "Expired", e.Gone, id="410-expired"),
    pytest.param(413, "RequestEntityTooLarge", e.ApiError, id="413-too-large-generic"),
    pytest.param(415, "UnsupportedMediaType", e.UnsupportedMediaType, id="415-unsupported-media-type"),
    pytest.param(422, "Invalid", e.Invalid, id="422-invalid"),
    pytest.param(429, "TooManyRequests", e.TooManyRequests, id="429-too-many-requests"),
    pytest.param(500, "InternalError", e.ServerError, id="500-internal"),
    pytest.param(500, "ServerTimeout", e.ServerError, id="500-server-timeout"),
    pytest.param(503, "ServiceUnavailable", e.ServerError, id="503-unavailable"),
    pytest.param(504, "Timeout", e.ServerError, id="504-timeout"),
    pytest.param(404, "", e.NotFound, id="unknown-reason-falls-back-to-code"),
    pytest.param(418, "", e.ApiError, id="unknown-4xx-is-plain-api-error"),
    pytest.param(599, "", e.ServerError, id="unknown-5xx-is-server-error"),
]


@pytest.mark.parametrize(("code", "reason", "cls"), STATUS_TABLE)
def test_error_from_status(code: int, reason: str, cls: type[e.ApiError]) -> None:
    status = {"kind": "Status", "code": code, "reason": reason, "message": "it\nbroke",
              "details": {"name": "web-1", "kind": "pods"}}
    err = e.error_from_status(status)
    assert type(err) is cls
    assert (err.status, err.reason, str(err)) == (code, reason, "it broke")
    assert err.details == {"name": "web-1", "kind": "pods"}
    assert err.body is status


def test_conflict_and_already_exists_are_siblings() -> None:
    assert not issubclass(e.AlreadyExists, e.Conflict)
    assert not issubclass(e.Conflict, e.AlreadyExists)
    assert issubclass(e.ApiConnectionError, e.ApiError)
    assert not issubclass(e.ConfigError, e.ApiError)


BARE_TABLE = [
    pytest.param(400, "GET", e.BadRequest, "the server rejected our request for an unknown reason", id="400"),
    pytest.param(401, "GET", e.Unauthorized, "the server has asked for the client to provide credentials", id="401"),
    pytest.param(403, "GET", e.Forbidden, "nope from proxy", id="403-keeps-server-text"),
    pytest.param(404, "GET", e.NotFound, "the server could not find the requested resource", id="404"),
    pytest.param(409, "POST", e.AlreadyExists, "the server reported a conflict", id="409-post-already-exists"),
    pytest.param(409, "PUT", e.Conflict, "the server reported a conflict", id="409-put-conflict"),
    pytest.param(410, "GET", e.Gone, "the server responded with the status code 410 but did not return more "
                 "information", id="410"),
    pytest.param(422, "POST", e.Invalid, "the server rejected our request due to an error in our request", id="422"),
    pytest.param(429, "GET", e.TooManyRequests, "the server has received too many requests and has asked us to "
                 "try again later", id="429"),
    pytest.param(500, "GET", e.ServerError, "an error on the server ('nope from proxy') has prevented the request "
                 "from succeeding", id="500"),
    pytest.param(503, "GET", e.ServerError, "the server is currently unable to handle the request", id="503"),
]


@pytest.mark.parametrize(("code", "method", "cls", "message"), BARE_TABLE)
def test_error_from_non_status_body(code: int, method: str, cls: type[e.ApiError], message: str) -> None:
    err = e.error_from_response(code, b"nope from proxy\n", method)
    assert type(err) is cls
    assert err.status == code
    assert str(err) == message


def test_status_body_without_code_takes_the_http_code() -> None:
    err = e.error_from_response(404, orjson.dumps({"kind": "Status", "reason": "", "message": "gone fishing"}), "GET")
    assert type(err) is e.NotFound
    assert (err.status, str(err)) == (404, "gone fishing")


def test_retry_after_from_header_or_details() -> None:
    status = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "details": {"retryAfterSeconds": 3}}
    assert e.error_from_status(status).retry_after == 3.0
    assert e.error_from_status(status, retry_after=1.0).retry_after == 1.0
    assert e.error_from_status({"kind": "Status", "code": 500}).retry_after is None


@pytest.mark.parametrize(("code", "reason", "cls"), STATUS_TABLE)
async def test_wire_status_to_exception(fake: FakeApiServer, code: int, reason: str, cls: type[e.ApiError]) -> None:
    fake.on("GET", "/api/v1/namespaces/ns/pods/web-1", fail(code, reason, "pods \"web-1\" says no"))
    async with ApiClient(ClientConfig(host=fake.url), qps=0, max_retries=0) as api:
        with pytest.raises(cls) as info:
            await api.get(PODS, "web-1", "ns")
    assert type(info.value) is cls
    assert info.value.status == code
    assert str(info.value) == 'pods "web-1" says no'
    assert info.value.body["kind"] == "Status"


async def test_wire_non_status_body(fake: FakeApiServer, client: ApiClient) -> None:
    async def html(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="<html>not here</html>", content_type="text/html")

    fake.on("GET", "/api/v1/namespaces/ns/pods/x", html)
    with pytest.raises(e.NotFound, match="the server could not find the requested resource"):
        await client.get(PODS, "x", "ns")


async def test_wire_ok_is_not_an_error(fake: FakeApiServer, client: ApiClient) -> None:
    fake.on("GET", "/api/v1/namespaces/ns/pods/x", reply({"kind": "Pod", "metadata": {"name": "x"}}))
    assert (await client.get(PODS, "x", "ns"))["metadata"]["name"] == "x"
