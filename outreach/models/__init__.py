"""The models of the outreach app, one module per concern; imported here so Django
finds them (the app label stays `outreach`, the tables `outreach_*`).

- outreach.mailboxes.models: Security, SmtpCredential, OAuthAuthorization;
- outreach.campaigns.models: Campaign, CampaignStep, CampaignStats, StepVariantStats;
- outreach.contacts.models: Contact, Suppression, ContactImport;
- outreach.sending.models: Enrollment, DeletedEnrollment, Message, CredentialCampaignStats,
  SendClaim;
- outreach.intake.models: RelayWebhookToken;
- outreach.conversations.models: Reply, ReplyResponse;
- outreach.domains.models: SenderDomainCheck;
- outreach.blocklist.models: BlocklistEntry;
- outreach.domain_cap.models: RecipientDomainCount.
"""

from outreach.blocklist.models import BlocklistEntry
from outreach.campaigns.models import Campaign, CampaignStats, CampaignStep, StepVariantStats
from outreach.contacts.models import Contact, ContactImport, Suppression
from outreach.conversations.models import Reply, ReplyResponse
from outreach.domain_cap.models import RecipientDomainCount
from outreach.domains.models import SenderDomainCheck
from outreach.intake.models import RelayWebhookToken
from outreach.mailboxes.models import OAuthAuthorization, Security, SmtpCredential
from outreach.sending.models import (
    CredentialCampaignStats,
    DeletedEnrollment,
    Enrollment,
    Message,
    SendClaim,
)

__all__ = [
    "BlocklistEntry",
    "Campaign",
    "CampaignStats",
    "CampaignStep",
    "Contact",
    "ContactImport",
    "CredentialCampaignStats",
    "DeletedEnrollment",
    "Enrollment",
    "Message",
    "OAuthAuthorization",
    "RecipientDomainCount",
    "RelayWebhookToken",
    "Reply",
    "ReplyResponse",
    "Security",
    "SendClaim",
    "SenderDomainCheck",
    "SmtpCredential",
    "StepVariantStats",
    "Suppression",
]
