"""Checks on what an account registers: the URL (scheme, host, SSRF guard) and
the event filters. Each returns the messages to show, empty when valid."""

import socket
from urllib.parse import urlsplit

from webhooks.models import ALL_EVENTS, EVENT_TYPES
from webhooks.transport import UnsafeAddress, resolve_checked

MAX_URL_LENGTH = 2048


def url_problems(url: str) -> list[str]:
    if len(url) > MAX_URL_LENGTH:
        return [f"Must be at most {MAX_URL_LENGTH} characters."]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return ["Enter a valid URL."]
    if parts.scheme not in ("http", "https"):
        return ["Must start with http:// or https://."]
    if not parts.hostname:
        return ["Must name a host."]
    if any(ch.isspace() for ch in url):
        return ["Enter a valid URL."]
    try:
        resolve_checked(parts.hostname, port or (443 if parts.scheme == "https" else 80))
    except UnsafeAddress as e:
        return [f"Not allowed: {e}. Webhooks must reach a public address."]
    except (socket.gaierror, UnicodeError):
        return [f"The host {parts.hostname} does not resolve."]
    return []


def event_filter_problems(value) -> list[str]:
    if not isinstance(value, list) or not value:
        return ['Must be a non-empty list of event types, or ["*"].']
    if not all(isinstance(item, str) for item in value):
        return ["Every entry must be a string."]
    if len(set(value)) != len(value):
        return ["Must not repeat an entry."]
    if ALL_EVENTS in value:
        return [] if value == [ALL_EVENTS] else ['"*" must be the only entry.']
    unknown = [item for item in value if item not in EVENT_TYPES]
    if unknown:
        return [f"Unknown event type {unknown[0]!r}. Known: {', '.join(EVENT_TYPES)}."]
    return []
