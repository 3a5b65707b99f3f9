"""A Telegram bot (aiogram 3) that sends a campaign to the users of a CSV file
sent in the chat, and shows its progress while sending, then while the
service delivers it, each in one message edited in place.

Only the chats listed in ``TELEGRAM_TRUSTED_CHATS`` (comma-separated chat
ids) may use it: anyone can find a bot, and this one messages real people.
Others are told so in one line. In a trusted chat, send the users file
(columns ``country_code``, ``cellphone``, the others session variables;
comma or semicolon) as a document with the caption ``/campaign POLL_ID``, or
answer ``/campaign POLL_ID`` to such a document::

    pip install '.[bot]'
    TELEGRAM_BOT_TOKEN=123:abc TELEGRAM_TRUSTED_CHATS=12345 python examples/telegram_progress_bot.py

Every send goes through a delivery ledger (``TELEGRAM_BOT_JOURNAL``, an
SQLite file, ``telegram-bot.db`` by default) under a run named after the
chat, the poll and the file's content (``tg-<chat>-<poll>-<sha256[:12]>``):
a second ``/campaign`` of the same file resends nobody, it follows the
campaign again. Every failure (a bad file, a refused send, a send that may or
may not have arrived, tracking given up after ``--track-timeout`` or failed
after the send) is told in the chat in one line.

Telegram limits edits: the message is edited at most once per ``--every``
seconds, never with unchanged text (Telegram refuses those), and a 429 from
the Bot API is waited out (its ``retry_after``) and the edit made again.
Without ``CAMPAIGNKIT_API_KEY`` the campaign goes to an in-process sandbox;
``TELEGRAM_API_URL`` points the bot at another Bot API server.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from aiogram import Bot, Dispatcher, F, Router
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramRetryAfter
from aiogram.filters import Command, CommandObject
from aiogram.types import Document, Message
from aiogram.utils.token import TokenValidationError, validate_token

from campaignkit import BulkReport, CampaignClient, CampaignKitError, ausers_from_csv
from campaignkit.errors import TimeoutError
from campaignkit.ledger import Ledger, ledger_from
from campaignkit.progress import ProgressUpdate
from campaignkit.sandbox import client_or_sandbox

log = logging.getLogger("telegram_progress_bot")

MAX_FILE_BYTES = 20 * 1024 * 1024  # what the Bot API lets a bot download
USAGE = (
    "Send the users CSV (country_code, cellphone, then session variables) as a file "
    "with the caption /campaign POLL_ID, or answer /campaign POLL_ID to it."
)


def trusted_chats(environ: Mapping[str, str]) -> frozenset[int]:
    """The chat ids of ``TELEGRAM_TRUSTED_CHATS``; a ValueError names a bad one."""
    chats = set()
    for part in environ.get("TELEGRAM_TRUSTED_CHATS", "").split(","):
        if part.strip():
            try:
                chats.add(int(part))
            except ValueError:
                raise ValueError(
                    f"TELEGRAM_TRUSTED_CHATS: {part.strip()!r} is no chat id"
                ) from None
    return frozenset(chats)


def bot_token(environ: Mapping[str, str]) -> str:
    """``TELEGRAM_BOT_TOKEN``; a SystemExit says what to set when it is
    missing or not shaped like a token (never quoting it: it is a secret)."""
    token = environ.get("TELEGRAM_BOT_TOKEN", "").strip()
    if not token:
        raise SystemExit(
            "set TELEGRAM_BOT_TOKEN to your bot's token (BotFather's /newbot gives one)"
        )
    try:
        validate_token(token)
    except TokenValidationError:
        raise SystemExit(
            "TELEGRAM_BOT_TOKEN is not a bot token: it looks like 123456:ABC-DEF... "
            "(BotFather's /token shows it)"
        ) from None
    return token


def run_name(chat_id: int, poll_id: str, content: bytes) -> str:
    """The ledger run of one file sent to one poll from one chat."""
    return f"tg-{chat_id}-{poll_id}-{hashlib.sha256(content).hexdigest()[:12]}"


def progress_text(update: ProgressUpdate) -> str:
    """The message for one update: a bar of the people settled, then the
    update in campaignkit's words (people per stage, failures, ETA)."""
    width = 20
    filled = int(update.fraction * width)  # full only when nobody is waiting
    return f"[{'#' * filled}{'-' * (width - filled)}]\n{update.text()}"


def send_summary(report: BulkReport, run: str) -> str:
    """What the send did, in one line: sent now, sent by an earlier /campaign, not sent."""
    counts = report.counts
    earlier = sum(chunk.size for chunk in report.accepted if chunk.resumed)
    parts = [f"{counts['accepted'] - earlier} sent now"]
    if earlier:
        parts.append(f"{earlier} sent by an earlier /campaign of this file (not resent)")
    parts += [f"{counts[name]} {name}" for name in ("invalid", "duplicate") if counts[name]]
    return f"Run {run}: " + ", ".join(parts)


def failure_lines(report: BulkReport) -> list[str]:
    """One line per kind of failure of the send."""
    lines = []
    if report.invalid:
        first = "; ".join(item.reason for item in report.invalid[:3])
        lines.append(f"{len(report.invalid)} rows not sent: {first}")
    for chunk in report.rejected[:1]:
        size = sum(c.size for c in report.rejected)
        lines.append(f"{size} users refused by the service: {one_line(chunk.error)}")
    if report.ambiguous:
        size = sum(c.size for c in report.ambiguous)
        lines.append(
            f"{size} users may or may not have been sent (the answer was lost); they are "
            "never resent by /campaign: check who replied before sending them otherwise"
        )
    return lines


def one_line(exc: BaseException | None) -> str:
    text = " ".join(str(exc).split()) if exc is not None else ""
    return text[:300] or type(exc).__name__


class LiveMessage:
    """One chat message edited in place within Telegram's limits: at most one
    edit per ``every`` seconds, none with the text it already shows, and a 429
    waited out (its ``retry_after``) and the same edit made again."""

    def __init__(self, bot: Bot, message: Message, every: float) -> None:
        self.bot = bot
        self.message = message
        self.every = every
        self.text = message.text or ""
        self.not_before = time.monotonic() + every  # when the next edit may be made
        self.pending: str | None = None
        self.showing: asyncio.Task[None] | None = None

    def offer(self, text: str) -> None:
        """Show ``text`` when the limits allow, without waiting for it: a
        callback such as ``send_bulk``'s ``on_progress`` must not hold up the
        send. An offer not shown yet is replaced by the next one."""
        self.pending = text
        if self.showing is None or self.showing.done():
            self.showing = asyncio.create_task(self._show_pending())

    async def flush(self) -> None:
        """Wait until the last offer is shown."""
        if self.showing is not None:
            await self.showing

    async def _show_pending(self) -> None:
        while self.pending is not None:
            # Wait first, then take the latest offer: no stale text is shown.
            await asyncio.sleep(max(0.0, self.not_before - time.monotonic()))
            text, self.pending = self.pending, None
            await self.show(text)

    async def show(self, text: str) -> None:
        if text == self.text:
            return
        while True:
            await asyncio.sleep(max(0.0, self.not_before - time.monotonic()))
            try:
                await self.bot.edit_message_text(
                    text=text, chat_id=self.message.chat.id, message_id=self.message.message_id
                )
            except TelegramRetryAfter as flood:
                self.not_before = time.monotonic() + flood.retry_after
                continue
            self.text = text
            self.not_before = time.monotonic() + self.every
            return


def campaign_router(
    client: CampaignClient,
    trusted: frozenset[int],
    journal: Ledger | str | Path,
    *,
    every: float = 2.0,
    track_timeout: float = 3600.0,
) -> Router:
    """``/campaign POLL_ID`` on (or in answer to) a CSV document, in trusted chats only."""
    router = Router()
    busy: set[int] = set()

    @router.message(~F.chat.id.in_(trusted))
    async def refuse(message: Message) -> None:
        await message.answer(
            f"This chat ({message.chat.id}) may not send campaigns: "
            "its id is not in the bot's TELEGRAM_TRUSTED_CHATS."
        )

    @router.message(Command("campaign"))
    async def campaign(message: Message, command: CommandObject, bot: Bot) -> None:
        document = message.document or (
            message.reply_to_message.document if message.reply_to_message else None
        )
        poll_id = (command.args or "").strip()
        if document is None or not poll_id:
            await message.answer(USAGE)
            return
        chat = message.chat.id
        if chat in busy:
            await message.answer("A campaign of this chat is still being sent: wait for its end.")
            return
        busy.add(chat)
        try:
            await run_campaign(message, bot, document, poll_id)
        except CampaignKitError as exc:
            await message.answer(f"Not sent: {one_line(exc)}")
        except Exception:
            log.exception("/campaign failed")
            await message.answer("Failed: an unexpected error (see the bot's log).")
        finally:
            busy.discard(chat)

    async def run_campaign(message: Message, bot: Bot, document: Document, poll: str) -> None:
        if (document.file_size or 0) > MAX_FILE_BYTES:
            await message.answer("Not sent: the file is over 20 MB, the most a bot can download.")
            return
        downloaded = await bot.download(document)
        assert downloaded is not None
        content = downloaded.read()
        run = run_name(message.chat.id, poll, content)
        sending = LiveMessage(bot, await message.answer(f"Sending {run}..."), every)
        try:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder, "users.csv")
                await asyncio.to_thread(path.write_bytes, content)
                try:
                    report = await client.send_bulk(
                        poll,
                        ausers_from_csv(path),
                        journal=journal,
                        run=run,
                        on_progress=lambda update: sending.offer(progress_text(update)),
                    )
                except UnicodeDecodeError:
                    await message.answer(
                        "Not sent: the file is not UTF-8 text (save it as CSV UTF-8)."
                    )
                    return
            await message.answer(send_summary(report, run))
            for line in failure_lines(report):
                await message.answer(line)
            if not report.acks:
                return
            posted = await message.answer(f"Following {report.counts['accepted']} users...")
            live = LiveMessage(bot, posted, every)
            group = client.track_many(report.acks, until="settled", timeout=track_timeout)
            again = "/campaign the same file again to follow it (nobody is resent)."
            try:
                async for update in group.updates(every):
                    await live.show(progress_text(update))
            except TimeoutError:
                waiting = report.counts["accepted"] - group.snapshot().done
                await message.answer(
                    f"Stopped following after {track_timeout:g} s, {waiting} still waiting: "
                    + again
                )
            except CampaignKitError as exc:  # sent: only following it failed
                await message.answer(f"Stopped following: {one_line(exc)}: {again}")
        finally:
            # Following starts meanwhile: the send's last update waits for the edit rate.
            await sending.flush()

    return router


def bot_session() -> AiohttpSession:
    api = os.environ.get("TELEGRAM_API_URL")
    return AiohttpSession(api=TelegramAPIServer.from_base(api)) if api else AiohttpSession()


async def main(every: float, speed: float, track_timeout: float) -> None:
    token = bot_token(os.environ)
    trusted = trusted_chats(os.environ)
    if not trusted:
        raise SystemExit("set TELEGRAM_TRUSTED_CHATS to the chat ids allowed to send campaigns")
    journal = ledger_from(os.environ.get("TELEGRAM_BOT_JOURNAL", "telegram-bot.db"))
    bot = Bot(token, session=bot_session())
    async with client_or_sandbox(speed=speed) as (client, _sandbox):
        dispatcher = Dispatcher()
        router = campaign_router(client, trusted, journal, every=every, track_timeout=track_timeout)
        dispatcher.include_router(router)
        async with journal:
            await dispatcher.start_polling(bot)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=3.0, help="seconds between edits")
    parser.add_argument("--speed", type=float, default=1.0, help="sandbox clock speed")
    parser.add_argument(
        "--track-timeout", type=float, default=3600.0, help="seconds a campaign is followed"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main(args.every, args.speed, args.track_timeout))
