from typing import Any

import yaml


def yaml_to_json_value(raw: bytes) -> Any:
    return yaml.safe_load(raw)
