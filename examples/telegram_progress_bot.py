"""A Telegram bot (aiogram 3) that sends a campaign and shows its progress in
one message, edited in place.

``/campaign users.csv`` sends the CSV's users (columns ``country_code``,
``cellphone``, the others session variables) to the first poll, posts one
message and edits it with each :class:`~campaignkit.progress.ProgressUpdate`::

    pip install '.[bot]'
    TELEGRAM_BOT_TOKEN=123:abc python examples/telegram_progress_bot.py

Telegram limits edits: the message is edited at most once per ``--every``
seconds, never with unchanged text (Telegram refuses those), and a 429 from
the Bot API is waited out (its ``retry_after``) and the edit made again, so
no update is lost. Without ``CAMPAIGNKIT_API_KEY`` the campaign goes to an
in-process sandbox; ``TELEGRAM_API_URL`` points the bot at another Bot API
server (a local one, or a test's stand-in).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from aiogram import Bot, Dispatcher, Router
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramRetryAfter
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from campaignkit import CampaignClient, users_from_csv
from campaignkit.progress import ProgressUpdate
from campaignkit.sandbox import client_or_sandbox


def progress_text(update: ProgressUpdate) -> str:
    """The message for one update: a bar of the people settled, then the
    update in campaignkit's words (people per stage, failures, ETA)."""
    width = 20
    filled = round(update.fraction * width)
    return f"[{'#' * filled}{'-' * (width - filled)}]\n{update.text()}"


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


def campaign_router(client: CampaignClient, *, every: float = 2.0) -> Router:
    """``/campaign PATH``: send the CSV at PATH (a file of the bot's machine:
    let only trusted chats use it) and follow the campaign in one message."""
    router = Router()

    @router.message(Command("campaign"))
    async def campaign(message: Message, command: CommandObject, bot: Bot) -> None:
        if not command.args:
            await message.answer("Usage: /campaign PATH.csv")
            return
        poll = (await client.list_polls())[0]
        report = await client.send_bulk(poll.id, users_from_csv(command.args.strip()))
        posted = await message.answer(f"Sending {report.total} users to {poll.name}...")
        live = LiveMessage(bot, posted, every)
        async for update in client.track_many(report.acks, until="settled").updates(every):
            await live.show(progress_text(update))

    return router


def bot_session() -> AiohttpSession:
    api = os.environ.get("TELEGRAM_API_URL")
    return AiohttpSession(api=TelegramAPIServer.from_base(api)) if api else AiohttpSession()


async def main(every: float, speed: float) -> None:
    bot = Bot(os.environ["TELEGRAM_BOT_TOKEN"], session=bot_session())
    async with client_or_sandbox(speed=speed) as (client, _sandbox):
        dispatcher = Dispatcher()
        dispatcher.include_router(campaign_router(client, every=every))
        await dispatcher.start_polling(bot)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=3.0, help="seconds between edits")
    parser.add_argument("--speed", type=float, default=1.0, help="sandbox clock speed")
    args = parser.parse_args()
    asyncio.run(main(args.every, args.speed))
