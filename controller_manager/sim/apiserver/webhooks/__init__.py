"""Admission webhooks: kube-sim calls the MutatingWebhookConfigurations and ValidatingWebhookConfigurations it
stores, as kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins do
(:mod:`.matching`: which apply; :mod:`.calling`: one HTTPS call; :mod:`.dispatch`: order, failure policies and
how the calls fit around the synchronous :class:`ApiServer`)."""

from controller_manager.sim.apiserver.webhooks.dispatch import (
    Attributes,
    admit_delete,
    admit_subresource,
    admit_write,
    may_apply,
)

__all__ = ["Attributes", "admit_delete", "admit_subresource", "admit_write", "may_apply"]
