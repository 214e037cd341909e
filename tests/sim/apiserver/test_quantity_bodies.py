"""Quantities in request bodies as the real server reads and writes them: ParseQuantity's error texts in the
400, the typed text kept when upstream keeps it, numbers read as encoding/json wrote them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.sim.apiserver.conftest import Client, deployment, pod

PODS = "/api/v1/namespaces/default/pods"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def with_requests(name: str, requests: dict[str, Any]) -> dict[str, Any]:
    body = pod(name)
    body["spec"]["containers"][0]["resources"] = {"requests": requests}
    return body


@pytest.mark.parametrize(("cpu", "message"), [
    pytest.param("abc", FORMAT, id="letters"),
    pytest.param(True, FORMAT, id="bool"),
    pytest.param({"n": 1}, FORMAT, id="object"),
    pytest.param("1K", "unable to parse quantity's suffix", id="bad-suffix"),
    pytest.param("1e", "unable to parse quantity's suffix", id="bare-exponent"),
    pytest.param(".e-10", "unable to parse numeric part of quantity", id="no-digits"),
])
async def test_a_bad_quantity_is_400_with_parse_quantitys_words(client: Client, cpu: Any, message: str) -> None:
    code, status = await client.post(PODS, with_requests("p", {"cpu": cpu}))
    assert code == 400, status
    assert status["message"] == f'Pod in version "v1" cannot be handled as a Pod: {message}'


@pytest.mark.parametrize(("given", "written"), [
    pytest.param("0.5", "500m", id="fraction"),
    pytest.param("+1", "+1", id="plus-kept"),
    pytest.param("1.500k", "1.500k", id="kept-as-typed"),
    pytest.param(" 2Gi ", "2Gi", id="trimmed"),
    pytest.param("2048Mi", "2Gi", id="binary-up"),
    pytest.param("1E3", "1E3", id="exponent-kept"),
    pytest.param(1000, "1k", id="json-int"),
    pytest.param(0.25, "250m", id="json-float"),
    pytest.param(None, "0", id="null-is-zero"),
])
async def test_quantities_are_written_as_upstream_writes_them(client: Client, given: Any, written: str) -> None:
    code, created = await client.post(PODS, with_requests("p", {"memory": given}))
    assert code == 201, created
    assert created["spec"]["containers"][0]["resources"]["requests"]["memory"] == written
    _, read = await client.get(f"{PODS}/p")
    assert read["spec"]["containers"][0]["resources"]["requests"]["memory"] == written


def _raw_pod(name: str, number: str) -> bytes:
    return json.dumps(with_requests(name, {"memory": "@"})).replace('"@"', number).encode()


@pytest.mark.parametrize(("number", "written"), [
    pytest.param("1e3", "1e3", id="exponent-kept"),
    pytest.param("1E3", "1E3", id="upper-exponent-kept"),
    pytest.param("1e+3", "1e+3", id="signed-exponent-kept"),
    pytest.param("10e2", "1e3", id="exponent-canonical"),
    pytest.param("1e-3", "1e-3", id="negative-exponent"),
    pytest.param("1.500", "1.500", id="three-decimals-kept"),
    pytest.param("0.500", "500m", id="leading-zero-canonical"),
    pytest.param("1.50", "1500m", id="two-decimals"),
    pytest.param("1.0", "1", id="point-zero"),
    pytest.param("1000", "1k", id="integer"),
])
@pytest.mark.parametrize("validation", ["Strict", "Ignore"])
async def test_a_json_number_is_read_by_its_text(client: Client, number: str, written: str, validation: str) -> None:
    # Quantity.UnmarshalJSON parses the number's literal bytes: 1e3 stays 1e3 where 1000 is 1k.
    code, created = await client.post(PODS, None, raw=_raw_pod("p", number), params={"fieldValidation": validation})
    assert code == 201, created
    assert created["spec"]["containers"][0]["resources"]["requests"]["memory"] == written
    _, read = await client.get(f"{PODS}/p")
    assert read["spec"]["containers"][0]["resources"]["requests"]["memory"] == written
    # An update decodes its body the same way.
    read["spec"]["containers"][0]["resources"]["requests"]["memory"] = "@"
    read["spec"]["activeDeadlineSeconds"] = 30
    raw = json.dumps(read).replace('"@"', number).encode()
    code, updated = await client.put(f"{PODS}/p", None, raw=raw, params={"fieldValidation": validation})
    assert code == 200, updated
    assert updated["spec"]["containers"][0]["resources"]["requests"]["memory"] == written


async def test_number_texts_do_not_leak_into_untyped_fields(client: Client) -> None:
    # A ControllerRevision's data is raw JSON: its numbers are values, written as Go writes a float64.
    raw = (b'{"apiVersion":"apps/v1","kind":"ControllerRevision","metadata":{"name":"r"},"revision":1,'
           b'"data":{"spec":{"x":1e3,"y":1.500}}}')
    code, created = await client.post("/apis/apps/v1/namespaces/default/controllerrevisions", None, raw=raw)
    assert code == 201, created
    assert created["data"] == {"spec": {"x": 1000, "y": 1.5}}


@pytest.mark.parametrize(("content_type", "patch", "written"), [
    pytest.param("application/merge-patch+json",
                 b'{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx",'
                 b'"resources":{"requests":{"memory":1e3}}}]}}}}', "1e3", id="merge-keeps-the-text"),
    pytest.param("application/json-patch+json",
                 b'[{"op":"add","path":"/spec/template/spec/containers/0/resources",'
                 b'"value":{"requests":{"memory":1.500}}}]', "1.500", id="json-patch-keeps-the-text"),
    pytest.param("application/strategic-merge-patch+json",
                 b'{"spec":{"template":{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":1e3}}}]}}}}',
                 "1k", id="strategic-reads-the-value"),
])
async def test_patch_numbers_as_json_patch_keeps_them(client: Client, content_type: str, patch: bytes,
                                                      written: str) -> None:
    # json-patch keeps each value's raw bytes (merge and RFC 6902 patches); a strategic merge patch works on
    # decoded maps, so its 1e3 is the float64 1000.
    code, _ = await client.post(DEPLOYS, deployment("web"))
    assert code == 201
    code, patched = await client.call("PATCH", f"{DEPLOYS}/web", raw=patch, headers={"Content-Type": content_type})
    assert code == 200, patched
    assert patched["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] == written
