"""The seam through which other apps add to a signup (billing: the Stripe customer): its
steps run before the signup's transaction, with the account not saved yet."""

import pytest

from accounts import services
from accounts.models import Account
from billing.customers import signup_customer_create

pytestmark = pytest.mark.django_db


def test_billing_registers_its_customer_step():
    assert signup_customer_create in services._signup_steps


def test_a_step_runs_before_the_signup_with_the_new_account_and_what_it_sets_is_saved(
    monkeypatch,
):
    seen = []

    def step(account):
        # Its id is chosen, nothing is written yet; what it sets is inserted with it.
        seen.append((account.pk, Account.objects.filter(pk=account.pk).exists()))
        account.psp_customer_id = "cus_from_the_step"

    monkeypatch.setattr(services, "_signup_steps", [step])
    signup = services.account_signup(email="steps@example.com")
    assert seen == [(signup.account.pk, False)]
    assert Account.objects.get(pk=signup.account.pk).psp_customer_id == "cus_from_the_step"


def test_a_failed_signup_runs_the_undos_and_leaves_nothing(monkeypatch):
    undone = []

    def acting_step(account):
        return lambda: undone.append(account.email)

    def failing_step(account):
        raise RuntimeError("later step failed")

    monkeypatch.setattr(services, "_signup_steps", [acting_step, failing_step])
    with pytest.raises(RuntimeError):
        services.account_signup(email="undo@example.com")
    assert undone == ["undo@example.com"]
    assert not Account.objects.filter(email="undo@example.com").exists()


def test_registering_a_step_twice_runs_it_once(monkeypatch):
    monkeypatch.setattr(services, "_signup_steps", [])

    def step(account):
        return None

    services.signup_step_register(step)
    services.signup_step_register(step)
    assert services._signup_steps == [step]
