"""The root CA certificate publisher (``root-ca-certificate-publisher-controller``): every namespace has the
``kube-root-ca.crt`` ConfigMap holding the CA bundle that verifies the API server."""

from controller_manager.controllers.rootcacertpublisher.bundle import InvalidRootCA, load_root_ca, read_ca
from controller_manager.controllers.rootcacertpublisher.publisher import (
    DESCRIPTION,
    DESCRIPTION_ANNOTATION,
    ROOT_CA_CERT_CONFIGMAP_NAME,
    RootCACertPublisher,
)

__all__ = ["DESCRIPTION", "DESCRIPTION_ANNOTATION", "ROOT_CA_CERT_CONFIGMAP_NAME", "InvalidRootCA",
           "RootCACertPublisher", "load_root_ca", "read_ca"]
