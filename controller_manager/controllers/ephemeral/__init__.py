"""The ephemeral volume controller (``ephemeral-volume-controller``): a claim per generic ephemeral volume."""

from .controller import EphemeralVolumeController

__all__ = ["EphemeralVolumeController"]
