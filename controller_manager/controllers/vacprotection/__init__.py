"""The VolumeAttributesClass protection controller (``volumeattributesclass-protection-controller``)."""

from .controller import VACProtectionController

__all__ = ["VACProtectionController"]
