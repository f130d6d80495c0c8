"""SQLAlchemy models, one per private module, re-exported here."""

from advisor.db.models._catalog import CatalogAlias, HardwareEntry, ModelEntry, QuantizationEntry
from advisor.db.models._deployment import Deployment
from advisor.db.models._ops import ApiToken, FittedModel, Job, Report
from advisor.db.models._raw_payload import RawPayload
from advisor.db.models._recommendation import Recommendation
from advisor.db.models._run import METRIC_COLUMNS, Run

__all__ = [
    "METRIC_COLUMNS",
    "ApiToken",
    "CatalogAlias",
    "Deployment",
    "FittedModel",
    "HardwareEntry",
    "Job",
    "ModelEntry",
    "QuantizationEntry",
    "RawPayload",
    "Recommendation",
    "Report",
    "Run",
]
