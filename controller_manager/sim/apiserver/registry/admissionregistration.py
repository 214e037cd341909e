"""admissionregistration.k8s.io kinds (``pkg/registry/admissionregistration/<kind>/strategy.go``): webhook
configurations and validating admission policies (and their bindings) track generation; their rules are in
:mod:`controller_manager.sim.apiserver.admission_registration`."""

from __future__ import annotations

from controller_manager.sim.apiserver import admission_registration
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError

GROUP = "admissionregistration.k8s.io"


class ValidatingWebhookConfigurationStrategy(Strategy):
    group = GROUP
    kind = "ValidatingWebhookConfiguration"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return admission_registration.webhook_configuration_errors(obj, old, mutating=False)


class MutatingWebhookConfigurationStrategy(Strategy):
    group = GROUP
    kind = "MutatingWebhookConfiguration"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return admission_registration.webhook_configuration_errors(obj, old, mutating=True)


class ValidatingAdmissionPolicyStrategy(Strategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicy"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return admission_registration.policy_errors(obj, old)


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    group = GROUP
    kind = "ValidatingAdmissionPolicyBinding"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return admission_registration.policy_binding_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (
    ValidatingWebhookConfigurationStrategy(), MutatingWebhookConfigurationStrategy(),
    ValidatingAdmissionPolicyStrategy(), ValidatingAdmissionPolicyBindingStrategy())
