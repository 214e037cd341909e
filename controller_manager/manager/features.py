"""``--feature-gates``: the feature gates this daemon acts on, parsed as kube-controller-manager parses them.

Guarantees (component-base ``featuregate``):
- The value is ``key=bool`` pairs separated by commas (``WatchListClient=false``); blanks around keys and values
  are ignored, empty entries skipped, booleans take Go's ``strconv.ParseBool`` forms. Given several times, the
  flags merge (a later pair wins for its key).
- Errors carry upstream's words: ``missing bool value for K``, ``invalid value of K=V, err: ...``,
  ``unrecognized feature gate: K``.
- Only gates that change what this daemon does are known; every other upstream gate is refused rather than
  silently ignored (the behaviour it would select is described per controller instead).
"""

from __future__ import annotations

from dataclasses import dataclass

Overrides = tuple[tuple[str, bool], ...]

# Lists through watches (sendInitialEvents) instead of paged lists: client-go's gate, which kube-controller-manager
# registers in its own --feature-gates. Beta since 1.30, on by default since 1.35.
WATCH_LIST_CLIENT = "WatchListClient"


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    default: bool
    pre_release: str  # "ALPHA", "BETA" (GA gates are no longer listed by --help upstream either)


KNOWN: dict[str, FeatureSpec] = {
    WATCH_LIST_CLIENT: FeatureSpec(default=True, pre_release="BETA"),
}


def _parse_bool(text: str) -> bool:
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def parse_feature_gates(text: str) -> Overrides:
    """``"A=true,B=false"`` -> ``(("A", True), ("B", False))``; raises ValueError with upstream's message."""
    pairs: dict[str, bool] = {}
    for entry in text.split(","):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"missing bool value for {key}")
        value = value.strip()
        try:
            pairs[key] = _parse_bool(value)
        except ValueError as exc:
            raise ValueError(f"invalid value of {key}={value}, err: {exc}") from None
    unknown = [f"unrecognized feature gate: {key}" for key in pairs if key not in KNOWN]
    if unknown:  # utilerrors.NewAggregate's text: one error alone, several bracketed
        raise ValueError(unknown[0] if len(unknown) == 1 else "[" + ", ".join(unknown) + "]")
    return tuple(pairs.items())


def merge(flags: list[Overrides]) -> Overrides:
    """Several ``--feature-gates`` flags as one set of overrides: later pairs win for their key."""
    merged: dict[str, bool] = {}
    for overrides in flags:
        merged.update(overrides)
    return tuple(sorted(merged.items()))


def enabled(overrides: Overrides, gate: str) -> bool:
    """Whether ``gate`` is on: its override, else its default."""
    for key, value in overrides:
        if key == gate:
            return value
    return KNOWN[gate].default


def known_features() -> list[str]:
    """The --help lines, as featuregate.KnownFeatures words them."""
    return [f"{name}=true|false ({spec.pre_release} - default={str(spec.default).lower()})"
            for name, spec in sorted(KNOWN.items())]
