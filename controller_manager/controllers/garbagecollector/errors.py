"""The collector's own error types, and the markers that tell a worker not to retry.

- :class:`RestMappingError`: an ownerReference (or an object) names an apiVersion/kind discovery does not
  serve (yet). Retried with backoff: a CRD may appear at the next discovery resync. Messages as upstream's
  ``errors.go``.
- :class:`EnqueuedVirtualDeleteEvent` / :class:`NamespacedOwnerOfClusterScopedObject`: outcomes of
  ``attempt_to_delete_item`` that end the item's processing without a retry, as upstream's sentinel errors.
"""

from __future__ import annotations


class RestMappingError(Exception):
    def __init__(self, kind: str, version: str) -> None:
        self.kind = kind
        self.version = version
        super().__init__(f"unable to get REST mapping for {version}/{kind}.")

    def message(self) -> str:
        """The long form, telling the operator what to do about a reference to an unknown kind."""
        vk = f"{self.version}/{self.kind}"
        return (f"unable to get REST mapping for {vk}. If {vk} is an invalid resource, then you should manually "
                f"remove ownerReferences that refer {vk} objects.")


class EnqueuedVirtualDeleteEvent(Exception):
    def __init__(self) -> None:
        super().__init__("enqueued virtual delete event")


class NamespacedOwnerOfClusterScopedObject(Exception):
    def __init__(self) -> None:
        super().__init__("cluster-scoped objects cannot refer to namespaced owners")
