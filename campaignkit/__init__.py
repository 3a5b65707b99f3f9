"""campaignkit: async SDK for the Conversation Campaign and Session Service."""

from typing import TYPE_CHECKING

from ._deprecated import renamed
from ._funnel import Funnel
from ._guards import Breaker, Canary
from ._input.phones import Phone
from ._version import __version__
from .bulk import (
    BulkOptions,
    BulkReport,
    InvalidInput,
    SendWindow,
    ausers_from_csv,
    follow_run,
    users_from_csv,
)
from .client import CampaignClient, RawAnswer
from .config import ClientConfig, RetryPolicy, SessionQueryNames
from .errors import (
    AmbiguousSendError,
    APIError,
    AuthenticationError,
    BadRequestError,
    CampaignKitError,
    ConfigurationError,
    ConnectionError,
    LedgerError,
    NotFoundError,
    RateLimitError,
    RedirectError,
    ResponseError,
    RetiredEndpointError,
    ServerError,
    TimeoutError,
    ValidationError,
)
from .ledger import MemoryLedger
from .models import (
    Agent,
    CampaignAck,
    CampaignStatus,
    Deployment,
    HistoryEntry,
    LegacyDeployment,
    Location,
    Message,
    Poll,
    SessionKey,
    SessionMeta,
    SessionPage,
    SessionUpdate,
    SessionUser,
    Tag,
    User,
    deployment_squad,
)
from .progress import ProgressUpdate
from .status import CampaignState, DeploymentStatus, is_in_progress
from .tracker import CampaignTracker, DeploymentChange

__all__ = [
    "APIError",
    "Agent",
    "AmbiguousSendError",
    "AuthenticationError",
    "BadRequestError",
    "Breaker",
    "BulkOptions",
    "BulkReport",
    "CampaignAck",
    "CampaignClient",
    "CampaignKitError",
    "CampaignState",
    "CampaignStatus",
    "CampaignTracker",
    "Canary",
    "ClientConfig",
    "ConfigurationError",
    "Funnel",
    "LedgerError",
    "MemoryLedger",
    "ConnectionError",
    "Deployment",
    "DeploymentChange",
    "DeploymentStatus",
    "HistoryEntry",
    "InvalidInput",
    "LegacyDeployment",
    "Location",
    "Message",
    "NotFoundError",
    "Phone",
    "Poll",
    "ProgressUpdate",
    "RateLimitError",
    "RawAnswer",
    "RedirectError",
    "ResponseError",
    "RetiredEndpointError",
    "RetryPolicy",
    "SendWindow",
    "ServerError",
    "SessionKey",
    "SessionMeta",
    "SessionPage",
    "SessionQueryNames",
    "SessionUpdate",
    "SessionUser",
    "Tag",
    "TimeoutError",
    "User",
    "ValidationError",
    "deployment_squad",
    "is_in_progress",
    "ausers_from_csv",
    "follow_run",
    "users_from_csv",
    "__version__",
]

if TYPE_CHECKING:
    BulkProgress = ProgressUpdate
else:
    __getattr__ = renamed(__name__, {"BulkProgress": ("ProgressUpdate", ProgressUpdate)})
