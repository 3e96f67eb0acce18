"""Python client for the outreach service's API."""

from outreach_sdk import approvals, sequences, webhooks
from outreach_sdk.client import Client
from outreach_sdk.errors import *  # noqa: F403 - every error class, by its code's name
from outreach_sdk.errors import ERROR_CLASSES, APIConnectionError, OutreachError, error_class

__version__ = "0.1.0"

__all__ = [
    "ERROR_CLASSES",
    "APIConnectionError",
    "Client",
    "OutreachError",
    "error_class",
    "approvals",
    "sequences",
    "webhooks",
]
