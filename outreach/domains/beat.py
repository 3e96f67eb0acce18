"""Beat tasks of the domain checks: mailboxes' From domains, accounts' tracking domains."""

from celery import shared_task

from outreach.domains.services import sender_domains_check_due, tracking_domains_check_due


@shared_task(name="outreach.tasks.sender_domains_check", ignore_result=True)
def sender_domains_check() -> int:
    """Beat (hourly): check the From domain of each mailbox whose last check is a day old,
    or that has none. Returns the number checked."""
    return sender_domains_check_due()


@shared_task(name="outreach.tasks.tracking_domains_check", ignore_result=True)
def tracking_domains_check() -> int:
    """Beat (hourly): verify the tracking domains again. Returns the number checked."""
    return tracking_domains_check_due()
