"""tools/gen_schema.py's reading of Go sources: string constants, ``+enum`` types, ``+default`` markers
(literal and ``ref(...)``), openapi-gen's ``+optional``/``+required``, ``+union`` discriminators."""

from __future__ import annotations

import pytest

from tools import gen_schema

SRC = '''package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +enum
type Color string

const (
	// Red is red.
	ColorRed Color = "Red"
	ColorBlue Color = "Blue" // trailing comment
	ColorDefault = ColorBlue
	Untyped = "x"
)

const Green Color = "Green"
const Other = Color("Other")

// +default="Blue"
type Shade string

type Paint struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	Color Color `json:"color,omitempty"`
	// +k8s:optional
	Colors []Color `json:"colors"`
	// +default=ref(ColorRed)
	Primary *Color `json:"primary,omitempty"`
	// +default=3
	// +required
	Coats int32 `json:"coats,omitempty"`
	Shade Shade `json:"shade"`
	ByName map[string]Color `json:"byName,omitempty"`
	Count int64 `json:"count,string"`
}

// +union
type Finish struct {
	// +unionDiscriminator
	Kind string `json:"kind"`
	// +optional
	Gloss *string `json:"gloss,omitempty"`
}
'''
PKG = "k8s.io/api/paint/v1"


@pytest.fixture
def resolver() -> gen_schema.Resolver:
    types = {f"{PKG}.{t.name}": t for t in gen_schema.parse_go(SRC, PKG)}
    consts = {f"{PKG}.{c.name}": c for c in gen_schema.parse_consts(SRC, PKG)}
    return gen_schema.Resolver(types, consts)


def test_string_constants() -> None:
    got = [(c.name, c.type_expr, c.value, c.ref) for c in gen_schema.parse_consts(SRC, PKG)]
    assert got == [("ColorRed", "Color", "Red", False), ("ColorBlue", "Color", "Blue", False),
                   ("ColorDefault", "", "ColorBlue", True), ("Untyped", "", "x", False),
                   ("Green", "Color", "Green", False), ("Other", "Color", "Other", False)]


def test_constant_values_and_types_follow_references(resolver: gen_schema.Resolver) -> None:
    assert resolver.const_value(f"{PKG}.ColorDefault") == "Blue"
    assert resolver.const_type(resolver.consts[f"{PKG}.ColorDefault"]) == f"{PKG}.Color"
    assert resolver.const_type(resolver.consts[f"{PKG}.Untyped"]) is None


def _field(resolver: gen_schema.Resolver, json_name: str) -> dict[str, object]:
    paint = resolver.types[f"{PKG}.Paint"]
    f = next(f for f in paint.fields if f.tags.get("json", "").split(",")[0] == json_name)
    rec = gen_schema.field_record(f, paint, resolver)
    assert rec is not None
    return rec


@pytest.mark.parametrize(("json_name", "expected"), [
    ("color", {"optional": True, "enum": "io.k8s.api.paint.v1.Color"}),
    ("colors", {"enum": "io.k8s.api.paint.v1.Color"}),  # +k8s:optional is not openapi-gen's +optional
    ("primary", {"default": "Red", "enum": "io.k8s.api.paint.v1.Color"}),
    ("coats", {"default": 3, "required": True}),
    ("shade", {"default": "Blue"}),  # the named type's marker
    ("byName", {"enum": "io.k8s.api.paint.v1.Color"}),
    ("count", {"jsonString": True}),
])
def test_field_markers(resolver: gen_schema.Resolver, json_name: str, expected: dict[str, object]) -> None:
    rec = _field(resolver, json_name)
    got = {k: rec[k] for k in ("optional", "required", "default", "enum", "jsonString") if k in rec}
    assert got == expected


def test_union_discriminator(resolver: gen_schema.Resolver) -> None:
    finish = resolver.types[f"{PKG}.Finish"]
    assert "union" in finish.markers
    kind = gen_schema.field_record(finish.fields[0], finish, resolver)
    assert kind is not None
    assert kind["unionDiscriminator"] is True
