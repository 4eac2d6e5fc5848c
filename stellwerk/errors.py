"""What :class:`stellwerk.client.Client` raises, and the one-line text of an API problem.

Every error is a :class:`ClientError`, so a script can catch them all. The texts are the
ones the ``stellwerk`` command prints after ``error:``: ``404 run … not found``,
``422 tasks.0.type: Field required``, ``cannot reach the API at …: …``.
"""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """Anything the client raises: the API refused, did not answer, or answered oddly."""


class ApiError(ClientError):
    """An error answer: its status and the problem's ``detail`` (or the status line)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status} {detail}")
        self.status = status
        self.detail = detail

    @classmethod
    def of(cls, response: httpx.Response) -> ApiError:
        """From an error answer, read: a problem+json body gives the detail."""
        try:
            problem = response.json()
        except ValueError:  # not JSON: a proxy's page, say
            problem = None
        detail = _detail(problem) if isinstance(problem, dict) else None
        return cls(response.status_code, detail or response.reason_phrase)


class Unreachable(ClientError):
    """No answer from the API's address: a connection refused, a name unknown, a timeout.

    Apart from :class:`ApiError` because the cure differs: the address is wrong or the
    API is down, not the request.
    """

    def __init__(self, base_url: str, reason: str) -> None:
        super().__init__(f"cannot reach the API at {base_url}: {reason}")
        self.base_url = base_url
        self.reason = reason


class UnexpectedAnswer(ClientError):
    """A success answer that is not what the route answers, e.g. no JSON object.

    Seen when the URL leads to something else than the API (a proxy's login page);
    raised so that no caller reads a half-understood answer as the API's.
    """


class StreamBroken(ClientError):
    """A stream (the events, a followed log) that broke off after it was opened."""

    def __init__(self, what: str, base_url: str, reason: str) -> None:
        super().__init__(f"the {what} stream from {base_url} broke: {reason}")
        self.reason = reason


def _detail(problem: dict[str, Any]) -> str | None:
    """The human part of a problem: ``detail``, a validation error list, or ``title``."""
    detail = problem.get("detail")
    if isinstance(detail, list):
        return "; ".join(_validation_error(item) for item in detail)
    if detail:
        return str(detail)
    title = problem.get("title")
    return str(title) if title else None


def _validation_error(item: object) -> str:
    """``tasks.0.type: …`` from one FastAPI/pydantic validation error (``body`` left out)."""
    if not isinstance(item, dict):
        return str(item)
    location = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
    message = str(item.get("msg", ""))
    return f"{location}: {message}" if location else message
