"""Typed domain errors. Domain code raises these; `handlers.base` maps each to a status and code.

Keeping the HTTP mapping out of the domain means the same errors serve the HTTP handlers, the
Celery worker and the command line.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Base of every error a caller is meant to see; `code` is the machine-readable name."""

    default_code = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code


class MalformedRequest(ServiceError):
    """The body could not be parsed at all (not JSON, bad encoding)."""

    default_code = "malformed_request"


class InvalidInput(ServiceError):
    """The body parsed but breaks the schema; `field` names the offending field."""

    default_code = "invalid_input"

    def __init__(self, message: str, *, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.field = field


class Unauthenticated(ServiceError):
    """No valid credentials were presented."""

    default_code = "unauthenticated"


class Forbidden(ServiceError):
    """Valid credentials, but this role may not do this."""

    default_code = "forbidden"


class NotFound(ServiceError):
    """The resource does not exist, or the caller may not know that it does."""

    default_code = "not_found"


class Conflict(ServiceError):
    """The request conflicts with the current state (e.g. a duplicate)."""

    default_code = "conflict"


class PayloadTooLarge(ServiceError):
    """The body is over the configured limit."""

    default_code = "payload_too_large"


class HeaderTooLarge(ServiceError):
    """A request header is longer than any client of ours sends."""

    default_code = "header_too_large"


class UnsupportedMediaType(ServiceError):
    """The Content-Type is not one this endpoint accepts."""

    default_code = "unsupported_media_type"


class RateLimited(ServiceError):
    """Too many requests; retry after `retry_after` seconds."""

    default_code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class Unavailable(ServiceError):
    """A dependency (queue, database) is down; retry after `retry_after` seconds."""

    default_code = "unavailable"

    def __init__(self, message: str, *, retry_after: int = 5, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after
