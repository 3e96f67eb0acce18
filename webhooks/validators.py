"""Checks on what an account registers: the URL (scheme, host, outbound guard) and
the event filters. Each returns the messages to show, empty when valid."""

from config.outbound import OutboundRefused, http_url_parts, resolve_checked
from webhooks.models import ALL_EVENTS, EVENT_TYPES, OPT_IN_EVENT_TYPES

MAX_URL_LENGTH = 2048


def url_problems(url: str) -> list[str]:
    if len(url) > MAX_URL_LENGTH:
        return [f"Must be at most {MAX_URL_LENGTH} characters."]
    try:
        _scheme, host, port = http_url_parts(url)
    except ValueError as e:
        return [str(e)]
    try:
        resolve_checked(host, port)
    except OutboundRefused as e:
        return [f"Not allowed: {e}. Webhooks must reach a public address."]
    except (OSError, UnicodeError):
        return [f"The host {host} does not resolve."]
    return []


def event_filter_problems(value: object) -> list[str]:
    if not isinstance(value, list) or not value:
        return ['Must be a non-empty list of event types, or ["*"].']
    if not all(isinstance(item, str) for item in value):
        return ["Every entry must be a string."]
    if len(set(value)) != len(value):
        return ["Must not repeat an entry."]
    if ALL_EVENTS in value:
        # "*" is the version 1 set; only opt-in types may be named beside it.
        if all(item == ALL_EVENTS or item in OPT_IN_EVENT_TYPES for item in value):
            return []
        opt_in = ", ".join(OPT_IN_EVENT_TYPES)
        return [f'"*" may be joined only by opt-in event types ({opt_in}).']
    known = EVENT_TYPES + OPT_IN_EVENT_TYPES
    unknown = [item for item in value if item not in known]
    if unknown:
        return [f"Unknown event type {unknown[0]!r}. Known: {', '.join(known)}."]
    return []
