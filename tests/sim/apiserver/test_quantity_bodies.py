"""Quantities in request bodies as the real server reads and writes them: ParseQuantity's error texts in the
400, the typed text kept when upstream keeps it, numbers read as encoding/json wrote them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sim.apiserver.conftest import Client, pod

PODS = "/api/v1/namespaces/default/pods"
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
