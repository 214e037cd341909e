"""admissionregistration.k8s.io kinds (``pkg/registry/admissionregistration/<kind>/strategy.go``): webhook
configurations and validating admission policies (and their bindings) track generation."""

from __future__ import annotations

from controller_manager.sim.apiserver.registry.base import Strategy

GROUP = "admissionregistration.k8s.io"


class ValidatingWebhookConfigurationStrategy(Strategy):
    group = GROUP
    kind = "ValidatingWebhookConfiguration"
    tracks_generation = True


class MutatingWebhookConfigurationStrategy(Strategy):
    group = GROUP
    kind = "MutatingWebhookConfiguration"
    tracks_generation = True


class ValidatingAdmissionPolicyStrategy(Strategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicy"
    tracks_generation = True


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicyBinding"
    tracks_generation = True


STRATEGIES: tuple[Strategy, ...] = (
    ValidatingWebhookConfigurationStrategy(), MutatingWebhookConfigurationStrategy(),
    ValidatingAdmissionPolicyStrategy(), ValidatingAdmissionPolicyBindingStrategy())
