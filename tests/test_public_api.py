"""The public names, pinned against ../shared/DESIGN.md (the contract).

Adding or removing a public name must be a deliberate change of this file.
"""

from __future__ import annotations

import builtins
import importlib

import pytest

import campaignkit
from campaignkit import errors

MODELS = [
    "Poll",
    "User",
    "SessionKey",
    "CampaignAck",
    "CampaignStatus",
    "Deployment",
    "SessionUpdate",
    "SessionPage",
    "SessionMeta",
    "SessionUser",
    "HistoryEntry",
    "Message",
    "Agent",
    "Tag",
    "LegacyDeployment",
]

# Child -> parent, as DESIGN draws the tree (plus the errors DESIGN leaves to us).
ERROR_TREE = {
    "ValidationError": "CampaignKitError",
    "APIError": "CampaignKitError",
    "BadRequestError": "APIError",
    "AuthenticationError": "APIError",
    "NotFoundError": "APIError",
    "RateLimitError": "APIError",
    "ServerError": "APIError",
    "ConnectionError": "CampaignKitError",
    "TimeoutError": "CampaignKitError",
    "ResponseError": "CampaignKitError",
    "AmbiguousSendError": "CampaignKitError",
    "ConfigurationError": "CampaignKitError",
    "LedgerError": "CampaignKitError",
    "RedirectError": "APIError",
    "RetiredEndpointError": "NotFoundError",
}

DESIGN_NAMES = {
    "campaignkit": [
        "CampaignClient",
        *MODELS,
        "deployment_squad",
        "CampaignState",
        "DeploymentStatus",
        "CampaignKitError",
        *ERROR_TREE,
        "CampaignTracker",
        "DeploymentChange",
    ],
    "campaignkit.errors": ["CampaignKitError", *ERROR_TREE],
    "campaignkit.ledger": ["Ledger", "MemoryLedger", "SqliteLedger", "PostgresLedger"],
    "campaignkit.sandbox": ["Sandbox"],
    "campaignkit.webhooks": [
        "parse_event",
        "WebhookEvent",
        "EventKind",
        "webhook_handler",
        "webhook_app",
        "first_reply_app",
        "first_reply_handler",
        "ReplyEvent",
        "AgentPicker",
        "NoAgentAvailableError",
    ],
    "campaignkit.workers": ["BulkWorkers", "broker_from", "send_chunk", "submit_run"],
    "campaignkit.sync": ["CampaignClient"],
    "campaignkit.testing": ["Exchange", "MockExchange", "Answer", "Request", "FakeTime"],
}

ALL = [
    "Funnel",
    "follow_run",
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
    "ConnectionError",
    "Deployment",
    "DeploymentChange",
    "DeploymentStatus",
    "HistoryEntry",
    "InvalidInput",
    "LedgerError",
    "LegacyDeployment",
    "Location",
    "MemoryLedger",
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
    "__version__",
    "ausers_from_csv",
    "deployment_squad",
    "is_in_progress",
    "users_from_csv",
]

WEBHOOKS_ALL = [
    "ASGIReceiver",
    "AgentPicker",
    "AgentSource",
    "Condition",
    "DEDUPE_NAMESPACE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_BODY",
    "DEFAULT_RETENTION",
    "DEFAULT_SECRET_HEADER",
    "DedupeStore",
    "DjangoView",
    "EVENTS_NAMESPACE",
    "EventKind",
    "EventRecorder",
    "FirstReplyHandler",
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "MAX_VALUE_LENGTH",
    "NESTING_KEYS",
    "NoAgentAvailable",
    "NoAgentAvailableError",
    "Question",
    "ReplyEvent",
    "SessionUpdater",
    "TemplateStatus",
    "WEBHOOK_HANDLER",
    "WEBHOOK_RECEIVER",
    "WebhookEvent",
    "WebhookHandler",
    "agent_json",
    "asgi_app",
    "django_view",
    "extract_reply",
    "first_reply_app",
    "first_reply_handler",
    "parse_event",
    "plain_text",
    "webhook_app",
    "webhook_handler",
]

CLIENT_METHODS = [
    "send_campaign",
    "get_campaign_status",
    "update_session",
    "list_sessions",
    "iter_sessions",
    "list_agents",
    "deploy_legacy",
    "get_session_history",
    "list_polls",
    "track",
    "send_bulk",
    "with_options",
]


@pytest.mark.parametrize(
    ("module", "name"),
    [(module, name) for module, names in DESIGN_NAMES.items() for name in names],
)
def test_design_names_are_importable(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name)


def test_all_is_the_pinned_list() -> None:
    assert sorted(campaignkit.__all__) == sorted(ALL)
    assert len(set(campaignkit.__all__)) == len(campaignkit.__all__)
    assert [name for name in ALL if not hasattr(campaignkit, name)] == []


def test_webhooks_all_is_the_pinned_list() -> None:
    webhooks = importlib.import_module("campaignkit.webhooks")
    assert sorted(webhooks.__all__) == sorted(WEBHOOKS_ALL)


def test_errors_are_the_same_objects_at_the_top() -> None:
    for name in DESIGN_NAMES["campaignkit.errors"]:
        assert getattr(campaignkit, name) is getattr(errors, name), name


@pytest.mark.parametrize(("child", "parent"), ERROR_TREE.items())
def test_error_tree(child: str, parent: str) -> None:
    assert issubclass(getattr(errors, child), getattr(errors, parent))


def test_transport_errors_are_the_builtins_too() -> None:
    assert issubclass(errors.ConnectionError, builtins.ConnectionError)
    assert issubclass(errors.TimeoutError, builtins.TimeoutError)


@pytest.mark.parametrize("method", CLIENT_METHODS)
def test_client_methods(method: str) -> None:
    assert callable(getattr(campaignkit.CampaignClient, method))


@pytest.mark.parametrize("name", ["checkpoint", "state", "counts", "result"])
def test_tracker_surface(name: str) -> None:
    assert hasattr(campaignkit.CampaignTracker, name)


@pytest.mark.parametrize("name", ["is_final", "is_failure", "is_success", "is_in_progress"])
def test_status_classification(name: str) -> None:
    assert hasattr(campaignkit.DeploymentStatus, name)


def test_campaign_states() -> None:
    assert [s.name for s in campaignkit.CampaignState] == ["PENDING", "CLAIMED", "DONE"]
