"""Back office: read-mostly views of the outreach resources, searchable by email.

Secrets (SMTP/IMAP passwords, relay signing keys) are excluded from every form and
list: the admin shows only whether one is set. Changes that have rules (dispatch,
pause, imports) go through the API, so the admin only edits harmless attributes.

Each package keeps its own pages (outreach/<package>/admin.py, with what they share
in outreach/admin_base.py); Django's autodiscovery imports this module, which imports
them.
"""

from outreach.approvals import admin as approvals_admin  # noqa: F401
from outreach.blocklist import admin as blocklist_admin  # noqa: F401
from outreach.campaigns import admin as campaigns_admin  # noqa: F401
from outreach.contacts import admin as contacts_admin  # noqa: F401
from outreach.conversations import admin as conversations_admin  # noqa: F401
from outreach.domains import admin as domains_admin  # noqa: F401
from outreach.intake import admin as intake_admin  # noqa: F401
from outreach.mailboxes import admin as mailboxes_admin  # noqa: F401
from outreach.sending import admin as sending_admin  # noqa: F401
