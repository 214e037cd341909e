"""YAML request bodies and YAML answers through the API, as a client sees them."""

from __future__ import annotations

import pytest

from tests.sim.apiserver.conftest import Client

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
HEADERS = {"Authorization": "Bearer admin-token", "Content-Type": "application/yaml"}
REPEATED = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: twice
data:
  a: "1"
  a: "2"
"""


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
async def test_repeated_yaml_keys_follow_field_validation(client: Client, validation: str) -> None:
    resp = await client.tc.post(f"{CONFIGMAPS}?fieldValidation={validation}", data=REPEATED, headers=HEADERS)
    body = await resp.json()
    if validation == "Strict":
        assert resp.status == 400
        assert body["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
                                   'error: yaml: unmarshal errors:\n  line 7: key "a" already set in map')
        return
    assert resp.status == 201, body
    assert body["data"] == {"a": "2"}  # the last one, as YAMLToJSON keeps it
    assert "Warning" not in resp.headers  # a warning spanning lines is not sent


async def test_yaml_scalars_are_read_as_go_yaml_v2_reads_them(client: Client) -> None:
    manifest = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: typed
  labels: {y: "1"}
data:
  octal: "0777"
  blob: !!binary aGVsbG8=
"""
    resp = await client.tc.post(CONFIGMAPS, data=manifest, headers=HEADERS)
    body = await resp.json()
    assert resp.status == 201, body
    assert body["metadata"]["labels"] == {"true": "1"}  # y is a boolean key in YAML 1.1
    assert body["data"] == {"octal": "0777", "blob": "hello"}  # !!binary is decoded into the text


async def test_a_yaml_answer_is_written_as_json_to_yaml_writes_it(client: Client) -> None:
    manifest = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out\ndata:\n  a10: 'yes'\n  a2: |\n"
                b"    line one\n    line two\n  \"n\": ''\n")
    resp = await client.tc.post(CONFIGMAPS, data=manifest, headers={**HEADERS, "Accept": "application/yaml"})
    assert resp.status == 201
    text = (await resp.read()).decode()
    assert text.startswith('apiVersion: v1\ndata:\n  a2: |\n    line one\n    line two\n  a10: "yes"\n  "n": ""\n'
                           "kind: ConfigMap\nmetadata:\n")


async def test_a_yaml_body_that_does_not_convert_is_unrecognized(client: Client) -> None:
    raw = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [x}\n"
    resp = await client.tc.post(CONFIGMAPS, data=raw, headers=HEADERS)
    assert resp.status == 400
    assert (await resp.json())["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): yaml: line 2: did not find expected ',' "
        f"or ']' ({raw[:30].hex()} ...)")
