"""examples/telegram_progress_bot.py driven through aiogram's dispatcher, with
a fake Bot API session (no network to Telegram) and the sandbox behind the
client: trusted chats only, the CSV sent as a document, a second /campaign
that resends nobody, one line per failure, one message edited in place."""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
import sys
import time
from asyncio.subprocess import PIPE
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
from aiogram import Bot, Dispatcher
from aiogram.client.session.base import BaseSession
from aiogram.exceptions import TelegramRetryAfter
from aiogram.methods import EditMessageText, GetFile, SendMessage, TelegramMethod
from aiogram.types import File, Message, Update

from campaignkit import CampaignClient, CampaignState, DeploymentStatus
from campaignkit.progress import ProgressUpdate
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "telegram_progress_bot.py"
TOKEN = "123456:test-token"
CHAT = 42
STRANGER = 666
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
    chat_id: int | str | None
    text: str
    message_id: int
    flooded: bool = False


class FakeBotApi(BaseSession):
    """The Bot API as aiogram's session sees it, in memory: messages sent and
    edited are recorded; files are served from ``files``; the edit numbered
    ``flood_at`` (from 1) of each message is answered 429 with ``retry_after``."""

    def __init__(self, flood_at: int = 0) -> None:
        super().__init__()
        self.flood_at = flood_at
        self.calls: list[Call] = []
        self.files: dict[str, bytes] = {}

    async def make_request(
        self, bot: Bot, method: TelegramMethod[Any], timeout: int | None = None
    ) -> Any:
        if isinstance(method, GetFile):
            data = self.files[method.file_id]
            return File(
                file_id=method.file_id,
                file_unique_id=method.file_id,
                file_size=len(data),
                file_path=f"documents/{method.file_id}",
            )
        assert isinstance(method, SendMessage | EditMessageText), method
        name = type(method).__name__
        if isinstance(method, SendMessage):
            number = 1001 + len(self.calls)
        else:
            assert method.message_id is not None
            number = method.message_id
        edits = len(self.edits(number))
        flooded = name == "EditMessageText" and edits + 1 == self.flood_at
        text = str(method.text)
        self.calls.append(Call(time.monotonic(), name, method.chat_id, text, number, flooded))
        if flooded:
            raise TelegramRetryAfter(  # type: ignore[misc]  # aiogram's generic __init__
                method=method, message="Too Many Requests", retry_after=RETRY_AFTER
            )
        return Message.model_validate(
            {
                "message_id": number,
                "date": 0,
                "chat": {"id": method.chat_id, "type": "private"},
                "text": method.text,
            },
            context={"bot": bot},
        )

    async def stream_content(
        self,
        url: str,
        headers: dict[str, Any] | None = None,
        timeout: int = 30,
        chunk_size: int = 65536,
        raise_for_status: bool = True,
    ) -> AsyncGenerator[bytes, None]:
        file_id = url.rsplit("/", 1)[1]
        yield self.files[file_id]

    async def close(self) -> None:
        pass

    def texts(self, method: str = "SendMessage", chat: int = CHAT) -> list[str]:
        """The texts sent to ``chat``, but the messages showing a send's progress."""
        return [
            c.text
            for c in self.calls
            if c.method == method and c.chat_id == chat and not c.text.startswith("Sending ")
        ]

    def edits(self, message_id: int) -> list[Call]:
        return [
            c for c in self.calls if c.method == "EditMessageText" and c.message_id == message_id
        ]


def document_message(bot: Bot, chat: int, file_id: str, caption: str, size: int) -> Update:
    return Update.model_validate(
        {
            "update_id": 1,
            "message": {
                "message_id": 1,
                "date": 0,
                "chat": {"id": chat, "type": "private"},
                "from": {"id": 7, "is_bot": False, "first_name": "Ana"},
                "document": {
                    "file_id": file_id,
                    "file_unique_id": file_id,
                    "file_name": "users.csv",
                    "mime_type": "text/csv",
                    "file_size": size,
                },
                "caption": caption,
            },
        },
        context={"bot": bot},
    )


def users_csv(count: int) -> bytes:
    """Semicolon-separated, as Excel writes in Spanish: delivered numbers, and
    every tenth one failing (9914: FAILURE, 9908: INVALID_PHONE, alternately)."""
    rows = ["country_code;cellphone;nombre"]
    for i in range(count):
        magic = 14 if i % 20 == 0 else 8
        phone = f"3001{i:02d}99{magic:02d}" if i % 10 == 0 else f"3002{i:06d}"
        rows.append(f"+57;{phone};Cliente {i}")
    return ("\r\n".join(rows) + "\r\n").encode()


@attrs.define
class Harness:
    example: ModuleType
    api: FakeBotApi
    bot: Bot
    dispatcher: Dispatcher
    poll: str

    async def send_file(self, content: bytes, *, chat: int = CHAT, caption: str = "") -> None:
        file_id = f"f{len(self.api.files)}"
        self.api.files[file_id] = content
        update = document_message(
            self.bot, chat, file_id, caption or f"/campaign {self.poll}", len(content)
        )
        async with asyncio.timeout(40):
            await self.dispatcher.feed_update(self.bot, update)


@pytest.fixture
async def harness(
    sb: Sandbox, client: CampaignClient, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    example = load_example()
    api = FakeBotApi(flood_at=getattr(request, "param", 0))
    dispatcher = Dispatcher()
    trusted = example.trusted_chats({"TELEGRAM_TRUSTED_CHATS": f" {CHAT}, 7"})
    router = example.campaign_router(
        client, trusted, tmp_path / "bot.db", every=EVERY, track_timeout=20
    )
    dispatcher.include_router(router)
    poll = (await client.list_polls())[0].id
    async with Bot(TOKEN, session=api) as bot:
        yield Harness(example, api, bot, dispatcher, str(poll))


@pytest.mark.parametrize("harness", [2], indirect=True)
async def test_a_csv_sent_in_the_chat_is_followed_in_one_edited_message(
    harness: Harness, sb: Sandbox
) -> None:
    await harness.send_file(users_csv(40))
    api = harness.api
    sending, summary, following = (c for c in api.calls if c.method == "SendMessage")
    assert summary.text.startswith(f"Run tg-{CHAT}-{harness.poll}-")
    assert summary.text.endswith(": 40 sent now")
    assert sending.text == f"Sending {summary.text[4:].split(':')[0]}..."
    # The send's progress, in the message that announced it, up to its end.
    sent = [e.text for e in api.edits(sending.message_id) if not e.flooded]
    assert sent[-1].splitlines()[:3] == [
        "[####################]",
        f"Finished; request {CampaignState.DONE.description}",
        "40/40 settled (100% of inputs): 40 sent",
    ]
    assert following.text == "Following 40 users..."
    assert api.texts() == [summary.text, following.text]  # then only edits
    assert {c.chat_id for c in api.calls} == {CHAT}
    edits = api.edits(following.message_id)
    # The 429 was waited out, and the same edit made again: no update lost.
    assert [i for i, e in enumerate(edits) if e.flooded] == [1]
    assert edits[2].text == edits[1].text
    assert edits[2].at - edits[1].at >= RETRY_AFTER
    shown = [e for e in edits if not e.flooded]
    texts = [e.text for e in shown]
    assert all(a != b for a, b in itertools.pairwise([following.text, *texts]))
    assert min(b.at - a.at for a, b in itertools.pairwise(shown)) >= EVERY * 0.95
    last = texts[-1].splitlines()
    assert last[:2] == [
        "[####################]",
        f"Finished; request {CampaignState.DONE.description}",
    ]
    # Every person counted, in the vocabulary of every screen.
    assert last[2].startswith("40/40 settled (100% of recipients): ")
    assert last[2].endswith(" delivered, 4 failed")
    assert last[3:] == [
        "FAILURE x2: failed after 3 retries",
        f"INVALID_PHONE x2: {DeploymentStatus.INVALID_PHONE.description}",
    ]


async def test_a_second_campaign_of_the_same_file_resends_nobody(
    harness: Harness, sb: Sandbox
) -> None:
    content = users_csv(10)
    await harness.send_file(content)
    await harness.send_file(content)
    summaries = [t for t in harness.api.texts() if t.startswith("Run ")]
    assert len(summaries) == 2
    assert summaries[0] == summaries[1].split(": ")[0] + ": 10 sent now"
    assert summaries[1].endswith(
        ": 0 sent now, 10 sent by an earlier /campaign of this file (not resent)"
    )
    snapshot = await sb.snapshot(users=False)
    assert len(snapshot["companies"][0]["launches"]) == 1  # one request reached the service
    # Another file is another run, sent.
    await harness.send_file(content + b"+57;3009999999;Nueva\r\n")
    assert [t for t in harness.api.texts() if t.startswith("Run ")][-1].endswith(": 11 sent now")


async def test_an_untrusted_chat_is_refused_in_one_line_and_nothing_is_sent(
    harness: Harness, sb: Sandbox
) -> None:
    await harness.send_file(users_csv(3), chat=STRANGER)
    assert harness.api.texts(chat=STRANGER) == [
        f"This chat ({STRANGER}) may not send campaigns: "
        "its id is not in the bot's TELEGRAM_TRUSTED_CHATS."
    ]
    assert (await sb.snapshot(users=False))["companies"][0]["launches"] in ([], {})


async def test_every_failure_is_told_in_one_line(harness: Harness, sb: Sandbox) -> None:
    api = harness.api
    await harness.send_file(b"telefono;pais\r\n3001234567;+57\r\n")
    await harness.send_file(b"country_code;cellphone\r\n+ 57;3001234567\r\n+57;12\r\n")
    await harness.send_file(users_csv(2), caption="/campaign no-such-poll")
    await harness.send_file(users_csv(2), caption="/campaign")
    await harness.send_file("país\n".encode("latin-1"))
    texts = api.texts()
    assert all("\n" not in text for text in texts)
    header, run, rows, run_refused, refused, usage, encoding = texts
    assert header == (
        "Not sent: 1 invalid input: header: needs a 'country_code' and a 'cellphone' column "
        "(read the columns 'telefono', 'pais' split on ';')"
    )
    assert run.endswith(": 0 sent now, 2 invalid")
    assert rows.startswith("2 rows not sent: line 2: country_code: must be '+' and 1 to 4 ")
    assert "(did you mean '+57'?)" in rows
    assert "line 3: cellphone: is too short: 2 digits" in rows
    assert run_refused.endswith(": 0 sent now")
    assert refused.startswith("2 users refused by the service: ")
    assert refused.endswith(" -> 404: Poll no-such-poll not found.")
    assert usage == harness.example.USAGE
    assert encoding == "Not sent: the file is not UTF-8 text (save it as CSV UTF-8)."


async def test_tracking_gives_up_after_its_timeout_and_says_so(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    example = load_example()
    api = FakeBotApi()
    dispatcher = Dispatcher()
    router = example.campaign_router(
        client, frozenset({CHAT}), tmp_path / "bot.db", every=0.1, track_timeout=0.5
    )
    dispatcher.include_router(router)
    poll = (await client.list_polls())[0].id
    async with Bot(TOKEN, session=api) as bot:
        harness = Harness(example, api, bot, dispatcher, str(poll))
        await harness.send_file(b"country_code,cellphone\n+57,3000009901\n")  # 9901: stuck
    assert api.texts()[-1] == (
        "Stopped following after 0.5 s, 1 still waiting: /campaign the same file again "
        "to follow it (nobody is resent)."
    )


async def test_a_failure_while_following_says_the_send_was_made(
    harness: Harness, sb: Sandbox
) -> None:
    # The send went through; following it failed (an answer that cannot be
    # read): the chat must not be told "Not sent".
    await sb.set_faults({"kind": "wrong_type", "route": "campaign_status"})
    await harness.send_file(users_csv(3))
    texts = harness.api.texts()
    assert texts[0].endswith(": 3 sent now")
    assert texts[-1].startswith("Stopped following: ")
    assert texts[-1].endswith(": /campaign the same file again to follow it (nobody is resent).")
    assert not any(text.startswith("Not sent") for text in texts)
    assert len((await sb.snapshot(users=False))["companies"][0]["launches"]) == 1


def test_trusted_chats_come_from_the_environment() -> None:
    trusted_chats: Any = load_example().trusted_chats
    assert trusted_chats({}) == frozenset()
    assert trusted_chats({"TELEGRAM_TRUSTED_CHATS": "1, -1002,"}) == {1, -1002}
    with pytest.raises(ValueError, match="'@me' is no chat id"):
        trusted_chats({"TELEGRAM_TRUSTED_CHATS": "1,@me"})


def test_progress_text_shows_the_eta_until_finished() -> None:
    text: Any = load_example().progress_text
    update = ProgressUpdate(
        5, 20, 3, 1, {}, (("FAILURE", 1),), CampaignState.CLAIMED, sent=1, eta=12.4
    )
    assert text(update) == (
        "[#####---------------]\n"
        f"In progress; request {CampaignState.CLAIMED.description}\n"
        "5/20 settled (25% of recipients): 15 waiting, 1 sent, 3 delivered, 1 failed\n"
        "FAILURE x1: failed after 3 retries\n"
        "about 12 s left"
    )
    assert "left" not in text(attrs.evolve(update, finished=True))
    # The bar is full only when nobody is waiting (199 of 200 filled it).
    almost = text(attrs.evolve(update, done=199, total=200, delivered=197))
    assert almost.startswith("[###################-]\n")


@pytest.mark.parametrize(
    ("token", "said"),
    [
        (None, "set TELEGRAM_BOT_TOKEN to your bot's token"),
        ("  ", "set TELEGRAM_BOT_TOKEN to your bot's token"),
        ("not-a-token", "TELEGRAM_BOT_TOKEN is not a bot token"),
    ],
)
async def test_a_missing_or_malformed_token_is_said_in_words(token: str | None, said: str) -> None:
    # It died with KeyError: 'TELEGRAM_BOT_TOKEN' and a traceback.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TELEGRAM_")}
    env["TELEGRAM_TRUSTED_CHATS"] = str(CHAT)
    if token is not None:
        env["TELEGRAM_BOT_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(EXAMPLE), env=env, stdout=PIPE, stderr=PIPE
    )
    _, raw = await asyncio.wait_for(process.communicate(), 30)
    err = raw.decode()
    assert process.returncode == 1
    assert err.startswith(said), err
    assert "Traceback" not in err
    assert token is None or not token.strip() or token not in err
