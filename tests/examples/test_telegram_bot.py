"""examples/telegram_progress_bot.py against a local stand-in of the Telegram
Bot API (aiogram pointed at it through its API server setting) and the
sandbox: one message posted, then edited in place within Telegram's limits."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Update
from aiohttp import web
from helpers.servers import serving

from campaignkit import CampaignClient, CampaignState, DeploymentStatus
from campaignkit.progress import ProgressUpdate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "telegram_progress_bot.py"
TOKEN = "123456:test-token"
CHAT = 42
EVERY = 0.3
RETRY_AFTER = 1


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("telegram_progress_bot", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@attrs.define
class Call:
    at: float
    method: str
    fields: dict[str, str]
    status: int


@attrs.define
class BotApi:
    """The Bot API's answers to sendMessage and editMessageText; the edit
    numbered ``flood_at`` (from 1) is answered 429 with ``retry_after``."""

    flood_at: int = 2
    calls: list[Call] = attrs.Factory(list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        assert request.match_info["token"] == TOKEN
        method = request.match_info["method"]
        fields = {key: str(value) for key, value in (await request.post()).items()}
        edits = sum(call.method == "editMessageText" for call in self.calls)
        flood = method == "editMessageText" and edits + 1 == self.flood_at
        self.calls.append(Call(time.monotonic(), method, fields, 429 if flood else 200))
        if flood:
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": f"Too Many Requests: retry after {RETRY_AFTER}",
                    "parameters": {"retry_after": RETRY_AFTER},
                },
                status=429,
            )
        message = {
            "message_id": 2,
            "date": 0,
            "chat": {"id": int(fields["chat_id"]), "type": "private"},
            "text": fields["text"],
        }
        return web.json_response({"ok": True, "result": message})

    def of(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]


@pytest.fixture
async def bot_api() -> AsyncIterator[BotApi]:
    api = BotApi()
    app = web.Application()
    app.router.add_post("/bot{token}/{method}", api.handle)
    async with serving(app) as url:
        api.url = url
        yield api


def campaign_message(bot: Bot, text: str) -> Update:
    return Update.model_validate(
        {
            "update_id": 1,
            "message": {
                "message_id": 1,
                "date": 0,
                "chat": {"id": CHAT, "type": "private"},
                "from": {"id": 7, "is_bot": False, "first_name": "Ana"},
                "text": text,
            },
        },
        context={"bot": bot},
    )


def write_users(path: Path, count: int) -> None:
    """Delivered numbers, and every tenth one failing (9914: FAILURE, 9908:
    INVALID_PHONE, alternately)."""
    rows = ["country_code,cellphone"]
    for i in range(count):
        magic = 14 if i % 20 == 0 else 8
        rows.append(f"+57,3001{i:02d}99{magic:02d}" if i % 10 == 0 else f"+57,3002{i:06d}")
    path.write_text("\n".join(rows) + "\n")


async def test_the_bot_edits_one_message_within_telegram_s_limits(
    bot_api: BotApi, client: CampaignClient, tmp_path: Path
) -> None:
    example = load_example()
    users = tmp_path / "users.csv"
    write_users(users, 40)
    dispatcher = Dispatcher()
    dispatcher.include_router(example.campaign_router(client, every=EVERY))
    session = AiohttpSession(api=TelegramAPIServer.from_base(bot_api.url))
    async with Bot(TOKEN, session=session) as bot:
        async with asyncio.timeout(30):
            await dispatcher.feed_update(bot, campaign_message(bot, f"/campaign {users}"))

    (post,) = bot_api.of("sendMessage")  # one message, then only edits
    assert post.fields["text"].startswith("Sending 40 users to ")
    edits = bot_api.of("editMessageText")
    assert {(e.fields["chat_id"], e.fields["message_id"]) for e in edits} == {(str(CHAT), "2")}
    flooded = [i for i, e in enumerate(edits) if e.status == 429]
    assert flooded == [1]
    # The 429 was waited out, and the same edit made again: no update lost.
    assert edits[2].fields["text"] == edits[1].fields["text"]
    assert edits[2].at - edits[1].at >= RETRY_AFTER
    done = [e for e in edits if e.status == 200]
    texts = [e.fields["text"] for e in done]
    assert all(a != b for a, b in itertools.pairwise([post.fields["text"], *texts]))
    assert min(b.at - a.at for a, b in itertools.pairwise([post, *done])) >= EVERY * 0.95
    last = texts[-1].splitlines()
    assert last[:2] == [
        "[####################]",
        f"Finished; request {CampaignState.DONE.description}",
    ]
    # Every person counted: sent (SUCCESS) ones are not dropped from the total.
    assert last[2].startswith("40/40 settled (100%): ")
    assert last[2].endswith(" delivered, 4 failed")
    assert last[3:] == [
        "FAILURE x2: failed after 3 retries",
        f"INVALID_PHONE x2: {DeploymentStatus.INVALID_PHONE.description}",
    ]


async def test_the_command_without_a_path_answers_its_usage(
    bot_api: BotApi, client: CampaignClient
) -> None:
    dispatcher = Dispatcher()
    dispatcher.include_router(load_example().campaign_router(client))
    session = AiohttpSession(api=TelegramAPIServer.from_base(bot_api.url))
    async with Bot(TOKEN, session=session) as bot:
        await dispatcher.feed_update(bot, campaign_message(bot, "/campaign"))
    assert [(c.method, c.fields["text"]) for c in bot_api.calls] == [
        ("sendMessage", "Usage: /campaign PATH.csv")
    ]


def test_progress_text_shows_the_eta_until_finished() -> None:
    text: Any = load_example().progress_text
    update = ProgressUpdate(
        5, 20, 3, 1, {}, (("FAILURE", 1),), CampaignState.CLAIMED, sent=1, eta=12.4
    )
    assert text(update) == (
        "[#####---------------]\n"
        f"In progress; request {CampaignState.CLAIMED.description}\n"
        "5/20 settled (25%): 15 waiting, 1 sent, 3 delivered, 1 failed\n"
        "FAILURE x1: failed after 3 retries\n"
        "about 12 s left"
    )
    assert "left" not in text(attrs.evolve(update, finished=True))
