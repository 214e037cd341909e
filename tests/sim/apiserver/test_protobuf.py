"""The protobuf codec: round trips of every kind of the schema, the wire details of gogo's proto2 marshalers, and
the errors a malformed body gets. (Byte-exactness against upstream's fixtures is checked by
tools/check_protobuf_fixtures.py, which reads them from a kubernetes/api checkout.)"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import codec, errors, gojson, protobuf, schema
from tests.sim.apiserver.schema_strategies import objects

KINDS = sorted(schema.kinds().items())
POD = "io.k8s.api.core.v1.Pod"


def _round_trip(api_version: str, kind: str, struct_name: str, drawn: dict[str, Any]) -> None:
    st_ = schema.struct(struct_name)
    want = gojson.normalize({"apiVersion": api_version, "kind": kind, **drawn}, st_)
    data = protobuf.encode_object(want, struct_name)
    assert data[:4] == b"k8s\x00"
    got = protobuf.decode_object(data)
    assert got["apiVersion"] == api_version
    assert got["kind"] == kind
    assert gojson.normalize(got, st_) == want
    assert protobuf.encode_object(gojson.normalize(got, st_), struct_name) == data  # one encoding per object


@pytest.mark.parametrize(("key", "struct_name"), KINDS, ids=[k for k, _ in KINDS])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_kind_round_trips(key: str, struct_name: str, data: st.DataObject) -> None:
    api_version, _, kind = key.rpartition("/")
    _round_trip(api_version, kind, struct_name, data.draw(objects(struct_name, 4)))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=objects(POD, 6))
def test_pods_round_trip(drawn: dict[str, Any]) -> None:
    _round_trip("v1", "Pod", POD, drawn)


# --- the wire, field by field -----------------------------------------------------------------------------------

OWNER_REF = "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference"
INT_OR_STRING_HOLDER = "io.k8s.api.core.v1.ServicePort"  # targetPort = 4 is an IntOrString


@pytest.mark.parametrize(("struct_name", "obj", "wire"), [
    # Non-pointer strings and ints are written even when zero; nil pointers (controller) are not.
    pytest.param(OWNER_REF, {}, "0a00 1a00 2200 2a00", id="zero-strings-written"),
    pytest.param(OWNER_REF, {"controller": False}, "0a00 1a00 2200 2a00 3000", id="pointer-false-written"),
    pytest.param("io.k8s.api.core.v1.ContainerPort", {"containerPort": -1},
                 "0a00 1000 18ffffffffffffffffff01 2200 2a00", id="negative-int32-ten-bytes"),
    # []string is a repeated field, never packed; map entries are {key=1, value=2} in key order.
    # (after the zero ObjectMeta, which is written too)
    pytest.param("io.k8s.api.core.v1.ConfigMap", {"data": {"b": "2", "a": "1"}},
                 "1206 0a0161 120131 1206 0a0162 120132", id="map-in-key-order"),
    pytest.param("io.k8s.api.core.v1.Capabilities", {"add": ["A", "B"]}, "0a0141 0a0142", id="repeated-strings"),
    pytest.param(INT_OR_STRING_HOLDER, {"targetPort": "http"},
                 "0a00 1200 1800 220a 0801 1000 1a0468747470 2800", id="intorstring-string"),
    pytest.param(INT_OR_STRING_HOLDER, {"targetPort": 80},
                 "0a00 1200 1800 2206 0800 1050 1a00 2800", id="intorstring-int"),
    pytest.param("io.k8s.api.core.v1.ResourceRequirements", {"limits": {"cpu": "100m"}},
                 "0a0d 0a03637075 1206 0a04313030 6d", id="quantity-message"),
    pytest.param("io.k8s.api.core.v1.Secret", {"data": {"k": "AAE="}}, "1207 0a016b 12020001 1a00",
                 id="bytes-map-value"),
])
def test_wire_details(struct_name: str, obj: dict[str, Any], wire: str) -> None:
    expected = bytes.fromhex(wire.replace(" ", ""))
    encoded = protobuf.encode_message(obj, struct_name)
    if struct_name.endswith(("ConfigMap", "Secret")):
        meta = protobuf.encode_message({}, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        expected = b"\x0a" + bytes([len(meta)]) + meta + expected
    assert encoded.hex() == expected.hex()
    assert gojson.normalize(protobuf.decode_message(encoded, struct_name), schema.struct(struct_name)) == \
        gojson.normalize(obj, schema.struct(struct_name))


def test_time_is_seconds_and_nanos() -> None:
    meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    encoded = protobuf.encode_message({"creationTimestamp": "2008-01-01T01:01:01Z"}, meta)
    assert bytes.fromhex("4208 08cda1e6bb04 1000") in encoded
    assert protobuf.decode_message(encoded, meta)["creationTimestamp"] == "2008-01-01T01:01:01Z"
    # A zero time is an empty message, and reads back as null.
    zero = protobuf.encode_message({}, meta)
    assert bytes.fromhex("4200") in zero
    assert protobuf.decode_message(zero, meta)["creationTimestamp"] is None


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_watch_frame_is_length_and_bare_event() -> None:
    body = protobuf.encode_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    frame = protobuf.watch_frame("ADDED", body)
    raw_extension = b"\x0a" + _varint(len(body)) + body
    event = b"\x0a\x05ADDED\x12" + _varint(len(raw_extension)) + raw_extension
    assert frame == len(event).to_bytes(4, "big") + event


# --- malformed input ---------------------------------------------------------------------------------------------

GOOD = protobuf.encode_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                               "data": {"a": "b"}})


@pytest.mark.parametrize(("data", "message"), [
    pytest.param(b"", "empty data", id="empty"),
    pytest.param(b"{}", "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]",
                 id="json"),
    pytest.param(b"k8s\x00", "empty body", id="magic-only"),
    pytest.param(GOOD[:10], "unexpected EOF", id="truncated-envelope"),
    pytest.param(b"k8s\x00\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "proto: negative length found during "
                 "unmarshaling", id="negative-length"),
    pytest.param(b"k8s\x00\x0a\x7f\x0a", "unexpected EOF", id="length-past-end"),
    pytest.param(b"k8s\x00\x08\x01", "proto: wrong wireType = 0 for field TypeMeta", id="wrong-wire-type"),
    pytest.param(b"k8s\x00\x0c", "proto: Unknown: wiretype end group for non-group", id="end-group"),
    pytest.param(b"k8s\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", "proto: integer overflow", id="overflow"),
])
def test_envelope_errors(data: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError) as info:
        protobuf.decode_envelope(data)
    assert str(info.value) == message


@pytest.mark.parametrize(("data", "message"), [
    pytest.param(b"\x0a\x05\x0a\x01", "unexpected EOF", id="truncated-string"),
    pytest.param(b"\x08\x01", "proto: wrong wireType = 0 for field ObjectMeta", id="wrong-wire-type"),
    pytest.param(b"\x0a", "unexpected EOF", id="tag-without-value"),
    pytest.param(b"\x0a\x80", "unexpected EOF", id="truncated-length"),
])
def test_message_errors(data: bytes, message: str) -> None:
    with pytest.raises(protobuf.ProtobufError) as info:
        protobuf.decode_message(data, "io.k8s.api.core.v1.ConfigMap")
    assert str(info.value) == message


@settings(max_examples=300, deadline=None)
@given(cut=st.integers(0, len(GOOD)), junk=st.binary(max_size=6))
def test_any_damaged_body_is_one_error_type(cut: int, junk: bytes) -> None:
    """Truncated or garbled bodies raise ProtobufError (never IndexError, UnicodeError...) or decode."""
    try:
        protobuf.decode_object(GOOD[:cut] + junk)
    except protobuf.ProtobufError:
        pass


def test_int32_keeps_the_low_32_bits_as_go_does() -> None:
    # containerPort = 3 sent as the 5-byte unsigned form of -1 reads as -1 (an int64 field would not truncate).
    port = protobuf.decode_message(b"\x18\xff\xff\xff\xff\x0f", "io.k8s.api.core.v1.ContainerPort")
    assert port["containerPort"] == -1
    status = protobuf.decode_message(b"\x08\xff\xff\xff\xff\x0f", "io.k8s.api.apps.v1.DeploymentStatus")
    assert status["observedGeneration"] == 2**32 - 1


POD_BODY = protobuf.encode_object(gojson.normalize(
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
     "spec": {"containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                              "resources": {"limits": {"cpu": "1"}}}]}}, schema.struct(POD)), POD)


@settings(max_examples=300, deadline=None)
@given(at=st.integers(4, len(POD_BODY) - 1), junk=st.binary(min_size=1, max_size=4), cut=st.booleans())
def test_a_garbled_body_is_a_400_or_an_object(at: int, junk: bytes, cut: bool) -> None:
    """Whatever a client sends, the body path ends in an object or a StatusError (400), nothing else."""
    body = POD_BODY[:at] + junk + (b"" if cut else POD_BODY[at + len(junk):])
    res = Resource("", "v1", "pods", "Pod", namespaced=True)
    code = 0
    try:
        parsed = codec.protobuf_body(body, ("v1", "Pod"))
        codec.typed(res, parsed, "Strict")
    except errors.StatusError as e:
        code = e.code
    assert code in (0, 400)


# --- apiextensions: the CustomResourceDefinition kind and its JSON schema types ------------------------------

_PROPS = schema.APIEXTENSIONS + "JSONSchemaProps"
_CRD = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"


def _crd_with(props: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "crontabs.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "crontabs", "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": props}}]}}


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(props=objects(_PROPS, 3))
def test_json_schema_props_round_trip(props: dict[str, Any]) -> None:
    """Every JSONSchemaProps form (raw JSON values, the "or" types, doubles) survives protobuf both ways."""
    _round_trip("apiextensions.k8s.io/v1", "CustomResourceDefinition", _CRD, _crd_with(props))


def test_crd_schema_special_forms_on_the_wire() -> None:
    props = {"type": "object", "maximum": 5, "minimum": 1.5, "default": {"a": [1, "x"]}, "enum": [1, "x", None],
             "additionalProperties": False, "items": [{"type": "string"}, {"type": "integer"}],
             "dependencies": {"a": ["b"], "c": {"type": "object"}},
             "x-kubernetes-validations": [{"rule": "self.a > 1", "message": "m"}]}
    want = gojson.normalize({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             **_crd_with(props)}, schema.struct(_CRD))
    message = protobuf.encode_message(want["spec"]["versions"][0]["schema"]["openAPIV3Schema"], _PROPS)
    assert b"\x49\x00\x00\x00\x00\x00\x00\x14\x40" in message  # maximum = 9, wire type 1: 5.0 little-endian
    assert b"\xf2\x01\x02\x08\x00" in message  # additionalProperties = 30 {allows = 1: false}
    assert b"\x42\x0f\x0a\x0d" + b'{"a":[1,"x"]}' in message  # default = 8 {raw = 1: the JSON}
    got = gojson.normalize(protobuf.decode_object(protobuf.encode_object(want, _CRD)), schema.struct(_CRD))
    assert got == want
    decoded = got["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert decoded["maximum"] == 5
    assert isinstance(decoded["maximum"], int)  # Go's JSON writes 5, not 5.0
    assert decoded["items"] == [{"type": "string"}, {"type": "integer"}]
    assert decoded["dependencies"] == {"a": ["b"], "c": {"type": "object"}}
    assert decoded["enum"] == [1, "x", None]


def test_a_negative_zero_double_keeps_its_sign() -> None:
    """A double is 64 fixed bits: -0.0 has the sign bit, read back as -0.0 (not the integer 0 an integral double
    becomes in JSON), so that the object has one encoding."""
    want = gojson.normalize({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             **_crd_with({"type": "number", "maximum": -0.0})}, schema.struct(_CRD))
    data = protobuf.encode_object(want, _CRD)
    assert b"\x00\x00\x00\x00\x00\x00\x00\x80" in data
    got = protobuf.decode_object(data)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["maximum"]
    assert isinstance(got, float)
    assert math.copysign(1.0, got) == -1.0
    _round_trip("apiextensions.k8s.io/v1", "CustomResourceDefinition", _CRD, _crd_with({"maximum": -0.0}))
