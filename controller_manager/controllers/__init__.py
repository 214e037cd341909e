"""The controllers this project implements, one package each; they never import each other.

``ALL`` lists every implemented Controller class, in no particular order: the manager's registry joins it
with kube-controller-manager's table of names (``controller_manager.manager.registry``), so adding a
controller is adding its class here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.controllers.attachdetach import AttachDetachController
from controller_manager.controllers.bootstrap import BootstrapSigner, TokenCleaner
from controller_manager.controllers.certificates import (
    CSRApprovingController,
    CSRCleanerController,
    CSRSigningController,
    PCRCleanerController,
)
from controller_manager.controllers.clusterroleaggregation import ClusterRoleAggregationController
from controller_manager.controllers.cronjob import CronJobController
from controller_manager.controllers.daemonset import DaemonSetController
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.disruption import DisruptionController
from controller_manager.controllers.endpoint import EndpointsController
from controller_manager.controllers.endpointslice import EndpointSliceController
from controller_manager.controllers.endpointslicemirroring import EndpointSliceMirroringController
from controller_manager.controllers.ephemeral import EphemeralVolumeController
from controller_manager.controllers.expand import ExpandController
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.job import JobController
from controller_manager.controllers.namespace import NamespaceController
from controller_manager.controllers.nodeipam import NodeIpamController
from controller_manager.controllers.nodelifecycle import NodeLifecycleController
from controller_manager.controllers.persistentvolume import PersistentVolumeBinderController
from controller_manager.controllers.podautoscaler import HorizontalController
from controller_manager.controllers.podgc import PodGCController
from controller_manager.controllers.pvcprotection import PVCProtectionController
from controller_manager.controllers.pvprotection import PVProtectionController
from controller_manager.controllers.replicaset import ReplicaSetController
from controller_manager.controllers.replication import ReplicationManager
from controller_manager.controllers.resourcequota import ResourceQuotaController
from controller_manager.controllers.rootcacertpublisher import RootCACertPublisher
from controller_manager.controllers.selinuxwarning import SELinuxWarningController
from controller_manager.controllers.serviceaccount import ServiceAccountsController
from controller_manager.controllers.serviceaccounttoken import LegacySATokenCleaner, TokensController
from controller_manager.controllers.servicecidrs import ServiceCIDRsController
from controller_manager.controllers.statefulset import StatefulSetController
from controller_manager.controllers.tainteviction import TaintEvictionController
from controller_manager.controllers.ttl import TTLController
from controller_manager.controllers.ttlafterfinished import TTLAfterFinishedController
from controller_manager.controllers.vacprotection import VACProtectionController

if TYPE_CHECKING:
    from controller_manager.runtime.controller import Controller

ALL: list[type[Controller]] = [
    PersistentVolumeBinderController,
    CronJobController,
    TTLAfterFinishedController,
    TTLController,
    JobController,
    DaemonSetController,
    DeploymentController,
    DisruptionController,
    EndpointsController,
    EndpointSliceController,
    EndpointSliceMirroringController,
    ReplicaSetController,
    ReplicationManager,
    ResourceQuotaController,
    RootCACertPublisher,
    ServiceAccountsController,
    ServiceCIDRsController,
    StatefulSetController,
    NodeIpamController,
    NodeLifecycleController,
    TaintEvictionController,
    PodGCController,
    NamespaceController,
    GarbageCollector,
    CSRSigningController,
    CSRApprovingController,
    CSRCleanerController,
    PCRCleanerController,
    ClusterRoleAggregationController,
    AttachDetachController,
    HorizontalController,
    PVCProtectionController,
    PVProtectionController,
    EphemeralVolumeController,
    VACProtectionController,
    ExpandController,
    SELinuxWarningController,
    TokensController,
    LegacySATokenCleaner,
    BootstrapSigner,
    TokenCleaner,
]
