"""Approvals in the MCP server: with a drafter key, the sending tools (start_outreach,
dispatch_campaign, respond_to_reply) skip the confirmation step and ask the service,
which holds the send as an approval until a person with an admin or sender key approves
it (docs/agents.md). Their answer says so. With any other key the confirmation step
stays: nothing is sent until the user confirmed the preview.

The key's role is read once, lazily, from GET /api_keys (the entry with the client's key
prefix).
"""

import threading
from typing import Any

from outreach_sdk import Client
from outreach_sdk.approvals import Approval


class KeyRole:
    """The role of the server's key, read on first use and kept."""

    def __init__(self, client: Client, role: str | None = None):
        self._client = client
        self._role = role
        self._lock = threading.Lock()

    def get(self) -> str:
        with self._lock:
            if self._role is None:
                prefix = self._client.key_prefix
                found = next(
                    (k.role for k in self._client.api_keys.list() if k.prefix == prefix), None
                )
                self._role = found or "admin"
            return self._role

    @property
    def drafting(self) -> bool:
        return self.get() == "drafter"


def held_answer(answer: Any, preview: dict[str, Any] | None = None) -> dict[str, Any]:
    """A send's answer with a drafter key: the approval, and what it means."""
    assert isinstance(answer, Approval), "a drafter key's send answers an approval"
    return {
        "status": "approval_requested",
        "message": "Nothing was sent: the service holds this send as an approval until a "
        "person with an admin or sender key approves it (it expires otherwise). "
        f"Approval id: {answer.id}.",
        "approval": answer.raw,
        **({"preview": preview} if preview is not None else {}),
    }
