"""Upstream's descriptions of the API's types and fields, as kube-apiserver's OpenAPI documents carry them.

``descriptions.json.gz`` beside the schema's ``types.json`` is generated with it, from the same upstream
commits (``tools/gen_openapi_docs.py``, run by ``tools/gen_schema.py``): for each struct, its own
description under ``""`` and the description of each field it declares, by JSON name. A field promoted
from an inline embedding (``apiVersion`` from TypeMeta) is described where it is declared.

The file is read on the first description asked for (the first OpenAPI document built), so a kube-sim
that no client asks for OpenAPI never loads it.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path

import orjson

from controller_manager.sim.apiserver import schema

__all__ = ["of_field", "of_type", "source"]

_DATA = Path(schema.__file__).with_name("descriptions.json.gz")


@functools.cache
def _data() -> dict[str, dict[str, dict[str, str]]]:
    result: dict[str, dict[str, dict[str, str]]] = orjson.loads(gzip.decompress(_DATA.read_bytes()))
    return result


def source() -> dict[str, object]:
    """The release and commits the descriptions were generated from (the schema's own)."""
    return dict(_data()["source"])


def of_type(name: str) -> str:
    """A type's description ("" if upstream has none)."""
    return _data()["types"].get(name, {}).get("", "")


def of_field(struct_name: str, json_name: str) -> str:
    """The description of a struct's JSON field, promoted fields included ("" if upstream has none)."""
    path = schema.struct(struct_name).inline_path.get(json_name)
    declaring = path[-1].type.name if path else struct_name
    return _data()["types"].get(declaring, {}).get(json_name, "")
