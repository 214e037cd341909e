"""Admission webhooks: kube-sim calls the MutatingWebhookConfigurations and ValidatingWebhookConfigurations it
stores, as kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins do
(:mod:`.matching`: which apply; :mod:`.calling`: one HTTPS call; :mod:`.dispatch`: order, failure policies and
how the calls fit around the synchronous :class:`ApiServer`)."""

from controller_manager.sim.apiserver.webhooks.dispatch import (
    Attributes,
    admit_create_subresource,
    admit_delete,
    admit_write,
)

__all__ = ["Attributes", "admit_create_subresource", "admit_delete", "admit_write"]
