"""Errors the services raise; the API maps each class to one HTTP status in one place."""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every error a caller can act on; the message is shown to the user."""


class NotFound(ServiceError):
    """A job, run or task named by the caller does not exist."""

    def __init__(self, kind: str, ident: object) -> None:
        super().__init__(f"{kind} {ident} not found")
        self.kind = kind
        self.ident = ident


class Conflict(ServiceError):
    """The request is well-formed but the object's state does not allow it."""


class Forbidden(ServiceError):
    """The caller is known but its token lacks a scope or the right (e.g. a tenant)."""


class InvalidInput(ServiceError):
    """Input that passed the schema but breaks a rule checked here (e.g. a cron expression).

    ``loc`` has the shape of a pydantic error location, so that the API reports both
    kinds of validation error alike.
    """

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(f"{'.'.join(str(part) for part in loc)}: {msg}")
        self.loc = loc
        self.msg = msg
