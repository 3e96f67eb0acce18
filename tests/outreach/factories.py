import factory

from outreach import enrollments
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.accounts.factories import AccountFactory


class CredentialFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SmtpCredential

    account = factory.SubFactory(AccountFactory)
    from_email = factory.Sequence(lambda n: f"sender{n}@example.com")
    smtp_host = "smtp.example.com"
    smtp_username = factory.LazyAttribute(lambda o: o.from_email)
    smtp_password = "smtp-secret"
    # Unpaced: tests that send several messages from one mailbox in a row. The model's
    # (and the API's) default is 120 / 300; the pace tests set their own.
    min_interval_seconds = 0
    max_interval_seconds = 0


class CampaignFactory(factory.django.DjangoModelFactory):
    """A campaign with one step and one enabled credential of its account (steps=0 / no
    credential: pass with_steps=0, with_credential=False)."""

    class Meta:
        model = Campaign
        skip_postgeneration_save = True

    account = factory.SubFactory(AccountFactory)
    name = factory.Sequence(lambda n: f"Campaign {n}")

    @factory.post_generation
    def with_steps(self, create, extracted, **kwargs):
        count = 1 if extracted is None else extracted
        for position in range(1, count + 1):
            CampaignStep.objects.create(
                campaign=self,
                position=position,
                subject=f"Hello {{{{first_name|there}}}} {position}" if position == 1 else "",
                body_text=f"Step {position} for {{{{company}}}}",
                delay_minutes=0 if position == 1 else 60 * 24,
            )

    @factory.post_generation
    def with_credential(self, create, extracted, **kwargs):
        if extracted is False:
            return
        self.credentials.add(CredentialFactory(account=self.account))


class ContactFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Contact

    account = factory.SubFactory(AccountFactory)
    email = factory.Sequence(lambda n: f"contact{n}@example.org")
    first_name = "Ada"
    company = "Acme"


class EnrollmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Enrollment

    campaign = factory.SubFactory(CampaignFactory)
    contact = factory.SubFactory(
        ContactFactory, account=factory.SelfAttribute("..campaign.account")
    )

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # Made in the state its history would have left it: counted in its campaign's
        # stats as the services that make that history count it.
        enrollment = super()._create(model_class, *args, **kwargs)
        enrollments.count(enrollment.campaign_id, **enrollments.counted(enrollment))
        return enrollment
