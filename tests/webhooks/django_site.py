"""A minimal Django site for the tests: settings configured once per process
(CSRF checked, no database), its URL patterns set by each test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Urls:
    """The site's URL configuration (Django takes any object with ``urlpatterns``)."""

    def __init__(self) -> None:
        self.urlpatterns: list[Any] = []

    def set(self, patterns: list[Any]) -> None:
        from django.urls import clear_url_caches

        self.urlpatterns = patterns
        clear_url_caches()


URLS = Urls()


@contextlib.contextmanager
def configured() -> Iterator[Urls]:
    """The site, set up on first use; its URL patterns emptied afterwards."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            ALLOWED_HOSTS=["testserver", "127.0.0.1"],
            ROOT_URLCONF=URLS,
            MIDDLEWARE=[
                "django.middleware.common.CommonMiddleware",
                "django.middleware.csrf.CsrfViewMiddleware",
            ],
            SECRET_KEY="tests-only-not-a-secret",
            USE_TZ=True,
        )
        django.setup()
    try:
        yield URLS
    finally:
        URLS.set([])
