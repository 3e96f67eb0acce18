"""Celery tasks of conversations: outreach.tasks.send_response (the `sending` queue)."""
