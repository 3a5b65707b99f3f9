"""The receiver as a Django view: :func:`django_view`.

Django is imported only when a view is built or called, so importing
:mod:`campaignkit.webhooks` never needs it. The view is async (Django runs it
under WSGI and ASGI alike), but the receiver runs on an event loop of its own,
in a daemon thread: under WSGI each request's loop ends with the request,
and the receiver's work must not (a callback past the deadline, its
``update_session``, the ``dedupe=`` and ``ledger=`` connections). What
needs opening on that loop is opened with :meth:`DjangoView.run`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ._receiver import OnEvent, Receiver

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

T = TypeVar("T")


class DjangoView(Receiver):
    """The receiver as an async Django view (see :func:`django_view`)."""

    csrf_exempt = True
    """The service sends no CSRF token: ``secret=`` is what authenticates it."""

    def __init__(self, on_event: OnEvent, **options: Any) -> None:
        from asgiref.sync import markcoroutinefunction

        super().__init__(on_event, **options)
        markcoroutinefunction(self)  # how Django tells an async view
        self._started = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.http import HttpResponse, HttpResponseNotAllowed

        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        given = request.headers.get(self.secret_header)
        # Django holds header values as Latin-1 text (PEP 3333): this is their bytes.
        secret = None if given is None else given.encode("latin-1", "replace")
        # Read here, not on the receiver's loop, where a slow sender would hold every delivery.
        body = _read_body(request, self.max_body)

        async def read_body(limit: int) -> bytes | None:
            return body

        running = asyncio.run_coroutine_threadsafe(self.answer(secret, read_body), self._running())
        answer = await asyncio.wrap_future(running)
        return HttpResponse(answer.body, status=answer.status, content_type="application/json")

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._started:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="campaignkit-webhooks", daemon=True
                )
                self._thread.start()
            return self._loop

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the receiver's loop and wait for its result: open
        (and close) there what it uses, e.g. ``view.run(ledger.open())`` in
        your ``AppConfig.ready()``; asyncpg and aiohttp connections serve the
        loop they were opened on only."""
        return asyncio.run_coroutine_threadsafe(work, self._running()).result()

    def close(self) -> None:
        """Finish the late callbacks (:meth:`aclose`) and stop the receiver's
        thread; a later request starts it again. Call it at shutdown."""
        with self._started:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.aclose(), loop).result()
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def _read_body(request: HttpRequest, limit: int) -> bytes | None:
    length = request.META.get("CONTENT_LENGTH")
    if isinstance(length, str) and length.isdigit() and int(length) > limit:
        return None
    chunks, size = [], 0
    while size <= limit:  # read() bypasses DATA_UPLOAD_MAX_MEMORY_SIZE: max_body rules
        chunk = request.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return None if size > limit else b"".join(chunks)


def django_view(on_event: OnEvent, **options: Any) -> DjangoView:
    """The webhook receiver as a Django view (``options`` are those of
    :func:`webhook_handler`): ``path("webhook", django_view(on_event))`` in
    your ``urlpatterns``; ``view.close()`` at shutdown finishes late callbacks."""
    return DjangoView(on_event, **options)
