"""Deployments: a named endpoint with its SLOs; runs are judged against them."""

from advisor.domain.deployments.services import DeploymentService

__all__ = ["DeploymentService"]
