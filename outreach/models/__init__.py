"""The models of the outreach app, one module per concern; imported here so Django
finds them (the app label stays `outreach`, the tables `outreach_*`).

- outreach.models.mailboxes: Security, SmtpCredential, OAuthAuthorization;
- outreach.models.campaigns: Campaign, CampaignStep, CampaignStats, StepVariantStats,
  BranchStats;
- outreach.models.contacts: Contact, Suppression, ContactImport;
- outreach.models.sending: Enrollment, Message, CredentialCampaignStats, SendClaim;
- outreach.models.tombstones: DeletedEnrollment;
- outreach.models.sweeps: SweepMark, SuppressedWatch;
- outreach.models.intake: RelayWebhookToken, UnmatchedReport;
- outreach.models.conversations: Reply, ReplyResponse;
- outreach.models.domains: SenderDomainCheck;
- outreach.models.blocklist: BlocklistEntry;
- outreach.models.domain_cap: RecipientDomainCount;
- outreach.models.sequences: RuleFire;
- outreach.models.branches: BranchDecision;
- outreach.models.analytics: AnalyticsHour, AnalyticsDay, AnalyticsUtcDay;
- outreach.models.reputation: ProviderPause, ProviderStrike, MailboxComplaint;
- outreach.models.approvals: Approval.
"""

from outreach.models.analytics import AnalyticsDay, AnalyticsHour, AnalyticsUtcDay
from outreach.models.approvals import Approval
from outreach.models.blocklist import BlocklistEntry
from outreach.models.branches import BranchDecision
from outreach.models.campaigns import (
    BranchStats,
    Campaign,
    CampaignStats,
    CampaignStep,
    StepVariantStats,
)
from outreach.models.contacts import Contact, ContactImport, Suppression
from outreach.models.conversations import Reply, ReplyResponse
from outreach.models.domain_cap import RecipientDomainCount
from outreach.models.domains import SenderDomainCheck
from outreach.models.intake import RelayWebhookToken, UnmatchedReport
from outreach.models.mailboxes import OAuthAuthorization, Security, SmtpCredential
from outreach.models.reputation import MailboxComplaint, ProviderPause, ProviderStrike
from outreach.models.sending import (
    CredentialCampaignStats,
    Enrollment,
    Message,
    SendClaim,
)
from outreach.models.sequences import RuleFire
from outreach.models.sweeps import SuppressedWatch, SweepMark
from outreach.models.tombstones import DeletedEnrollment

__all__ = [
    "AnalyticsDay",
    "AnalyticsHour",
    "AnalyticsUtcDay",
    "Approval",
    "BranchDecision",
    "BranchStats",
    "BlocklistEntry",
    "Campaign",
    "CampaignStats",
    "CampaignStep",
    "Contact",
    "ContactImport",
    "CredentialCampaignStats",
    "DeletedEnrollment",
    "Enrollment",
    "MailboxComplaint",
    "Message",
    "OAuthAuthorization",
    "ProviderPause",
    "ProviderStrike",
    "RecipientDomainCount",
    "RelayWebhookToken",
    "Reply",
    "ReplyResponse",
    "RuleFire",
    "Security",
    "SendClaim",
    "SenderDomainCheck",
    "SmtpCredential",
    "StepVariantStats",
    "Suppression",
    "SuppressedWatch",
    "SweepMark",
    "UnmatchedReport",
]
