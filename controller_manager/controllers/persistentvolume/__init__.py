"""The PersistentVolume binder (``persistentvolume-binder-controller``): binds claims to volumes, asks external
provisioners for volumes, and reclaims released volumes."""

from .controller import PersistentVolumeBinderController

__all__ = ["PersistentVolumeBinderController"]
