"""A survey answered on the sandbox: a two-question flow sent to five people,
all delivered (a webhook for the delivered event opens each session, as the
service does), three of whom answer in their own spelling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import attrs
import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit import CampaignClient, User
from campaignkit.sandbox import Sandbox

QUESTIONS = ("Do you like the new plan?", "Would you recommend it?")
PHONES = tuple(f"300{i:07d}" for i in range(5))  # +57 300...: the sandbox delivers them
ANSWERS = {  # phone -> what they write, one reply per question
    PHONES[0]: ("Yes", " no "),
    PHONES[1]: ("YES ", "No"),
    PHONES[2]: ("maybe",),
}
SEEDED = 5
"""Sessions the sandbox seeds in each poll, hours before the survey."""
SEEDED_QUESTION = "Hello! Do you have a minute for a short survey?"


@attrs.frozen
class Survey:
    poll_id: int
    sent_after: int
    """UNIX seconds: after the seeded sessions, before the survey's."""


@pytest.fixture
async def survey(sb: Sandbox, client: CampaignClient) -> AsyncIterator[Survey]:
    delivered: list[object] = []
    all_delivered = asyncio.Event()

    async def on_delivered(request: web.Request) -> web.Response:
        delivered.append(await request.json())
        if len(delivered) == len(PHONES):
            all_delivered.set()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/delivered", on_delivered)
    async with serving(app) as url:
        poll_id = (await client.list_polls())[0].id
        await sb.set_flow(poll_id, QUESTIONS)
        await sb.set_webhook(f"{url}/delivered", kinds=["delivered"])
        await sb.set_clock(advance=3600)  # the seeded sessions are an hour old
        sent_after = int(await sb.now())
        ack = await client.send_campaign(
            poll_id, [User(cellphone=phone, country_code="+57") for phone in PHONES]
        )
        await sb.set_clock(advance=60)
        async with asyncio.timeout(10):  # every session open before anyone answers
            await all_delivered.wait()
        for phone, texts in ANSWERS.items():
            for text in texts:
                await sb.reply(phone, launch_request_id=ack.launch_request_id, text=text)
        yield Survey(poll_id, sent_after)
