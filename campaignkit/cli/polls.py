"""``polls``, ``agents`` and ``update-session``."""

from __future__ import annotations

import orjson

from ..client import CampaignClient
from .argtypes import key_value
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .output import dumps, table


def register(add: AddCommand) -> None:
    p = add("polls", "the company's polls (conversations)")
    p.set_defaults(func=cmd_polls, needs_client=True)

    p = add("agents", "the company's active agents")
    p.add_argument("--tag", help="only agents with this tag name")
    p.set_defaults(func=cmd_agents, needs_client=True)

    p = add(
        "update-session",
        "set session variables and continue the conversation",
        "Update the session a webhook named (its session_id, or session.external_id).",
    )
    p.add_argument("session_external_id")
    p.add_argument("keys", nargs="*", type=key_value, metavar="KEY=VALUE")
    p.add_argument("--keys-json", help='variables as a JSON object, e.g. \'{"plan": "gold"}\'')
    p.set_defaults(func=cmd_update_session, needs_client=True)


async def cmd_polls(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    polls = await client.list_polls()
    if ctx.json:
        ctx.emit(polls)
    else:
        ctx.print(table([(p.id, p.name) for p in polls], ["id", "name"]))
    return ExitStatus.OK


async def cmd_agents(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    agents = await client.list_agents()
    if ctx.args.tag:
        wanted = ctx.args.tag.casefold()
        agents = [a for a in agents if any(t.name.casefold() == wanted for t in a.tags)]
    if ctx.json:
        ctx.emit(agents)
    else:
        rows = [
            (a.id, f"{a.first_name} {a.last_name}", a.email, ", ".join(t.name for t in a.tags))
            for a in agents
        ]
        ctx.print(table(rows, ["id", "name", "email", "tags"]))
    return ExitStatus.OK


async def cmd_update_session(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    keys: dict[str, str] = dict(ctx.args.keys)
    if ctx.args.keys_json:
        try:
            extra = orjson.loads(ctx.args.keys_json)
        except orjson.JSONDecodeError:
            raise UsageError("--keys-json is not valid JSON") from None
        if not isinstance(extra, dict):
            raise UsageError("--keys-json must be a JSON object")
        keys.update(
            {str(k): v if isinstance(v, str) else dumps(v).decode() for k, v in extra.items()}
        )
    if not keys:
        raise UsageError("give at least one KEY=VALUE (or --keys-json)")
    update = await client.update_session(ctx.args.session_external_id, keys)
    if ctx.json:
        ctx.emit(update)
    else:
        ctx.print(f"{update.message} (session {update.session_id})")
    return ExitStatus.OK
