"""Coverage-guided fuzzing of the response decoder with atheris.

Run by ``make fuzz`` for a bounded time. Any bytes, answered with any status to
any endpoint, must give a model or one of campaignkit's errors: anything else
(a KeyError, a cattrs or orjson exception) is a bug and crashes the run.
"""

from __future__ import annotations

import contextlib
import sys

import atheris

with atheris.instrument_imports():
    from campaignkit import errors, models
    from campaignkit._wire import sansio as wire
    from campaignkit._wire.decode import StatusAnswer
    from campaignkit.config import ClientConfig

CONFIG = ClientConfig(
    "fuzz-key", base_url="http://h", campaign_url="http://h", agent_url="http://h"
)
DECODERS = [
    (wire.SEND_CAMPAIGN, wire.decoder(models.CampaignAck)),
    (wire.CAMPAIGN_STATUS, wire.decoder(models.CampaignStatus)),
    (wire.UPDATE_SESSION, wire.decoder(models.SessionUpdate)),
    (wire.LIST_SESSIONS, wire.decoder(models.SessionPage)),
    (wire.LIST_AGENTS, wire.decoder(list[models.Agent])),
    (wire.DEPLOY_LEGACY, wire.decoder(models.LegacyDeployment)),
    (wire.SESSION_HISTORY, wire.decoder(list[models.HistoryEntry])),
    (wire.LIST_POLLS, wire.decoder(list[models.Poll])),
    (wire.CAMPAIGN_STATUS, wire.decoder(StatusAnswer)),
]
STATUSES = [200, 202, 301, 400, 401, 404, 410, 429, 500, 503]


def one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    endpoint, decode = DECODERS[provider.ConsumeIntInRange(0, len(DECODERS) - 1)]
    status = STATUSES[provider.ConsumeIntInRange(0, len(STATUSES) - 1)]
    retry_after = provider.ConsumeUnicodeNoSurrogates(30)
    body = provider.ConsumeBytes(provider.remaining_bytes())
    path = {
        name: "x" for name in ("poll_id", "launch_request_id", "session_external_id", "session_id")
    }
    request = wire.build_request(CONFIG, endpoint, path_params=path)
    with contextlib.suppress(errors.CampaignKitError):
        wire.read_response(request, status, {"Retry-After": retry_after}, body, decode)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
