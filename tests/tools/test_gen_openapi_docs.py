"""tools/gen_openapi_docs.py: which comment a declaration gets (Go's doc comment rules as gengo applies them)
and how openapi-gen turns its lines into a description; the enum section; and the committed data file."""

from __future__ import annotations

import gzip
import json

from controller_manager.sim.apiserver import schema
from tools import gen_openapi_docs as docs

SRC = '''package v1

// Color is a colour.
// +enum
type Color string

const (
	// ColorRed   means the
	// colour of fire.
	ColorRed Color = "Red"
	ColorBlue Color = "Blue"
	// Not an enum value: untyped.
	Untyped = "x"
)

/*
A block comment, not a doc comment.
*/

// Paint is paint.
//
// It has paragraphs.
//   indented example line
// TODO: not described
// +k8s:optional
//go:generate directive dropped
type Paint struct {
	// color of the paint.
	// ---
	// Everything after the dashes is left out.
	Color Color `json:"color,omitempty"`

	// Detached from the field below by a blank line.

	Coats int32 `json:"coats"`
	Gloss string `json:"gloss"` // a trailing comment describes the next field
	Shade *Color `json:"shade"`
	Colors []Color `json:"colors"`
	Hidden string `json:"-"`
}
'''
PKG = "k8s.io/api/paint/v1"


def test_comment_groups_as_go_forms_them() -> None:
    types, consts = docs.parse_docs(SRC, PKG)
    paint = types[f"{PKG}.Paint"]
    assert paint.lines == ["Paint is paint.", "", "It has paragraphs.", "  indented example line",
                           "TODO: not described", "+k8s:optional"]
    fields = {f.json: f.lines for f in paint.fields}
    assert fields == {
        "color": ["color of the paint.", "---", "Everything after the dashes is left out."],
        "coats": [],  # a blank line detaches a comment
        "gloss": [],
        "shade": ["a trailing comment describes the next field"],  # the group ending on the line above
        "colors": []}
    assert consts[f"{PKG}.ColorRed"] == ["ColorRed   means the", "colour of fire."]
    assert consts[f"{PKG}.ColorBlue"] == []


def test_description_reads_lines_as_openapi_gen() -> None:
    types, _ = docs.parse_docs(SRC, PKG)
    assert docs.description(types[f"{PKG}.Paint"].lines) == (
        "Paint is paint.\n\nIt has paragraphs.\n  indented example line")
    assert docs.description(["color of the paint.", "---", "left out"]) == "color of the paint."
    assert docs.description(["one", "two", "", "three"]) == "one two\n\nthree"
    assert docs.description(["Example:", "\tcode", "\tmore", "after"]) == "Example:\n\tcode\n\tmore\nafter"
    assert docs.description([]) == ""


def test_enum_section_lists_values_sorted_with_their_comments() -> None:
    lines = docs.enum_lines({"Red": ("ColorRed", "ColorRed   means the colour\nof fire."), "Blue": ("ColorBlue", "")})
    assert lines == ["", "Possible enum values:", ' - `"Blue"` ', ' - `"Red"` means the colour of fire.']
    assert docs.description(["The colour.", *lines]) == (
        'The colour.\n\nPossible enum values:\n - `"Blue"`\n - `"Red"` means the colour of fire.')
    assert docs.enum_lines({}) == []


def test_committed_descriptions_come_from_the_schemas_source() -> None:
    data = json.loads(gzip.decompress(docs.OUT.read_bytes()))
    assert data["source"] == schema.source()
    described = data["types"]
    for name in schema.struct_names("io.k8s.api.apps.v1."):
        assert described[name][""], name  # every apps/v1 struct has upstream's description
    assert described["io.k8s.apimachinery.pkg.apis.meta.v1.TypeMeta"]["apiVersion"].startswith("APIVersion ")
    assert described["io.k8s.apimachinery.pkg.api.resource.Quantity"][""].startswith("Quantity is ")
