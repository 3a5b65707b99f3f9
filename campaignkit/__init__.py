"""campaignkit: async SDK for the Conversation Campaign and Session Service."""

from ._version import __version__
from .errors import (
    AmbiguousSendError,
    APIError,
    AuthenticationError,
    BadRequestError,
    CampaignKitError,
    ConfigurationError,
    ConnectionError,
    NotFoundError,
    RateLimitError,
    RedirectError,
    ResponseError,
    RetiredEndpointError,
    ServerError,
    TimeoutError,
    ValidationError,
)
from .status import CampaignState, DeploymentStatus

__all__ = [
    "APIError",
    "AmbiguousSendError",
    "AuthenticationError",
    "BadRequestError",
    "CampaignKitError",
    "CampaignState",
    "ConfigurationError",
    "ConnectionError",
    "DeploymentStatus",
    "NotFoundError",
    "RateLimitError",
    "RedirectError",
    "ResponseError",
    "RetiredEndpointError",
    "ServerError",
    "TimeoutError",
    "ValidationError",
    "__version__",
]
