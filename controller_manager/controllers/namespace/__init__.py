"""The namespace controller: deleting a namespace deletes everything in it, then the namespace itself."""

from controller_manager.controllers.namespace.controller import NamespaceController

__all__ = ["NamespaceController"]
