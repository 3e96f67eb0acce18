"""Celery tasks of conversations: outreach.tasks.send_response (the `sending` queue)."""

from celery import shared_task

from outreach.conversations.response_sending import response_send


@shared_task(name="outreach.tasks.send_response", acks_late=True, ignore_result=True)
def send_response(response_id: str) -> str:
    """Send a queued response to a reply. Safe to run twice: the response is marked
    started (a conditional UPDATE) before its send, and only a queued response not
    started is sent."""
    return response_send(response_id=response_id)
