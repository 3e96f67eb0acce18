"""Usage periods and metering: calendar months without a subscription, the
subscription's period with one, the switch between the two mid-period without
double counting or overlap, atomic increments kept in shards (billing.models.UsageCount),
and the plan-limit check."""

import threading
from datetime import UTC, datetime

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor

from billing.errors import PlanLimitReached
from billing.models import UsageCount, UsageRecord
from billing.usage import plan_limit_enforce, usage_record_current, usage_record_increment
from config.api.handlers import exception_handler
from plans.models import Plan
from tests.accounts.factories import AccountFactory

pytestmark = pytest.mark.django_db


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def subscribe(account, start, end, status="active"):
    account.psp_subscription_id = "sub_test_1"
    account.psp_subscription_status = status
    account.psp_current_period_start = start
    account.psp_current_period_end = end
    account.save()


def periods(account) -> list[tuple[datetime, datetime, int]]:
    return [
        (r.period_start, r.period_end, r.sends_count)
        for r in UsageRecord.objects.filter(account=account).order_by("period_start")
    ]


def test_without_a_subscription_periods_are_calendar_months_utc(account):
    record = usage_record_current(account=account, at=utc(2026, 11, 21, 15, 0))
    assert (record.period_start, record.period_end) == (utc(2026, 11, 1), utc(2026, 12, 1))
    december = usage_record_current(account=account, at=utc(2026, 12, 31, 23, 59, 59))
    assert (december.period_start, december.period_end) == (utc(2026, 12, 1), utc(2027, 1, 1))


def test_an_active_subscription_gives_its_period(account):
    subscribe(account, utc(2026, 11, 15, 9, 30), utc(2026, 12, 15, 9, 30))
    record = usage_record_current(account=account, at=utc(2026, 11, 21))
    assert (record.period_start, record.period_end) == (
        utc(2026, 11, 15, 9, 30),
        utc(2026, 12, 15, 9, 30),
    )


@pytest.mark.parametrize("status", ["trialing", "past_due"])
def test_trialing_and_past_due_keep_the_subscription_period(account, status):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15), status=status)
    assert usage_record_current(account=account, at=utc(2026, 11, 21)).period_start == utc(
        2026, 11, 15
    )


@pytest.mark.parametrize("status", ["canceled", "incomplete", "unpaid"])
def test_an_inactive_subscription_falls_back_to_calendar_months(account, status):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15), status=status)
    assert usage_record_current(account=account, at=utc(2026, 11, 21)).period_start == utc(
        2026, 11, 1
    )


def test_increments_accumulate_in_the_period_and_a_new_period_starts_at_zero(account):
    for _ in range(3):
        usage_record_increment(account=account, at=utc(2026, 11, 2))
    usage_record_increment(account=account, at=utc(2026, 11, 30, 23, 59), by=2)
    usage_record_increment(account=account, at=utc(2026, 12, 1))
    assert periods(account) == [
        (utc(2026, 11, 1), utc(2026, 12, 1), 5),
        (utc(2026, 12, 1), utc(2027, 1, 1), 1),
    ]


def test_a_subscription_starting_mid_month_cuts_the_calendar_record(account):
    usage_record_increment(account=account, at=utc(2026, 11, 10), by=40)
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15))

    usage_record_increment(account=account, at=utc(2026, 11, 20))

    # The calendar record ends where the paid period starts: its 40 sends stay
    # there, the paid period starts from zero, nothing overlaps.
    assert periods(account) == [
        (utc(2026, 11, 1), utc(2026, 11, 15), 40),
        (utc(2026, 11, 15), utc(2026, 12, 15), 1),
    ]
    current = usage_record_current(account=account, at=utc(2026, 11, 21))
    assert (current.period_start, current.sends_count) == (utc(2026, 11, 15), 1)


def test_a_subscription_ending_mid_period_goes_back_to_calendar_months(account):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15))
    usage_record_increment(account=account, at=utc(2026, 11, 20), by=7)
    usage_record_increment(account=account, at=utc(2026, 12, 2), by=3)
    account.psp_subscription_status = "canceled"
    account.save()

    usage_record_increment(account=account, at=utc(2026, 12, 3))

    assert periods(account) == [
        (utc(2026, 11, 15), utc(2026, 12, 1), 10),
        (utc(2026, 12, 1), utc(2027, 1, 1), 1),
    ]


def test_a_subscription_ending_in_its_first_calendar_month_keeps_counting(account):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15))
    usage_record_increment(account=account, at=utc(2026, 11, 16), by=150)
    account.psp_subscription_status = "canceled"
    account.save()

    usage_record_increment(account=account, at=utc(2026, 11, 20))

    # Back on calendar months: the record goes on to Dec 1, sends included.
    assert periods(account) == [(utc(2026, 11, 15), utc(2026, 12, 1), 151)]


def test_the_tail_of_an_ended_period_does_not_overlap_the_next(account):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15))
    usage_record_increment(account=account, at=utc(2026, 11, 20), by=2)
    account.psp_subscription_status = "canceled"
    account.save()

    usage_record_increment(account=account, at=utc(2026, 12, 20))

    assert periods(account) == [
        (utc(2026, 11, 15), utc(2026, 12, 15), 2),
        (utc(2026, 12, 15), utc(2027, 1, 1), 1),
    ]


def test_a_renewal_notified_late_keeps_one_record_for_the_stripe_period(account):
    subscribe(account, utc(2026, 11, 15), utc(2026, 12, 15))
    usage_record_increment(account=account, at=utc(2026, 12, 14))
    # The period ended; the renewal's invoice.paid has not arrived yet.
    usage_record_increment(account=account, at=utc(2026, 12, 15, 1))
    subscribe(account, utc(2026, 12, 15), utc(2027, 1, 15))

    usage_record_increment(account=account, at=utc(2026, 12, 15, 2))
    usage_record_increment(account=account, at=utc(2027, 1, 3))

    assert periods(account) == [
        (utc(2026, 11, 15), utc(2026, 12, 15), 1),
        (utc(2026, 12, 15), utc(2027, 1, 15), 3),
    ]


def test_a_subscription_notified_late_shrinks_the_calendar_record(account):
    usage_record_increment(account=account, at=utc(2026, 11, 3), by=5)
    # The subscription began on October 20th; its notification arrives now.
    subscribe(account, utc(2026, 10, 20), utc(2026, 11, 20))
    usage_record_increment(account=account, at=utc(2026, 11, 5))
    subscribe(account, utc(2026, 11, 20), utc(2026, 12, 20))
    usage_record_increment(account=account, at=utc(2026, 11, 25))

    assert periods(account) == [
        (utc(2026, 11, 1), utc(2026, 11, 20), 6),
        (utc(2026, 11, 20), utc(2026, 12, 20), 1),
    ]


def test_increments_spread_over_shards_sum_to_the_exact_count(account, settings):
    settings.COUNTER_SHARDS = 4
    for _ in range(40):
        usage_record_increment(account=account, at=utc(2026, 11, 2))
    usage_record_increment(account=account, at=utc(2026, 11, 3), by=5)

    record = usage_record_current(account=account, at=utc(2026, 11, 3))
    assert record.sends_count == 45
    shards = list(UsageCount.objects.filter(record=record).values_list("shard", flat=True))
    assert 1 < len(shards) <= 4  # 40 sends on one shard of 4: a chance of 4 in 4**40
    assert set(shards) <= {0, 1, 2, 3}


def test_lowering_the_shard_count_keeps_the_higher_shards_counted(account, settings):
    settings.COUNTER_SHARDS = 8
    for _ in range(30):
        usage_record_increment(account=account, at=utc(2026, 11, 2))
    settings.COUNTER_SHARDS = 1
    usage_record_increment(account=account, at=utc(2026, 11, 2), by=2)

    assert periods(account) == [(utc(2026, 11, 1), utc(2026, 12, 1), 32)]


def test_an_increment_is_one_statement_once_the_period_has_its_record(
    account, settings, django_assert_num_queries
):
    settings.COUNTER_SHARDS = 2
    usage_record_increment(account=account, at=utc(2026, 11, 2))  # creates the record
    # Each shard's first send makes its row, in the same statement.
    for _ in range(6):
        with django_assert_num_queries(1):
            usage_record_increment(account=account, at=utc(2026, 11, 2))
    assert periods(account) == [(utc(2026, 11, 1), utc(2026, 12, 1), 7)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("shards", [1, 8])
def test_concurrent_increments_are_never_lost(settings, shards):
    """On one shard (every sender on one row) or spread: the record's creation, each
    shard row's creation and the adds race, and nothing is lost."""
    settings.COUNTER_SHARDS = shards
    account = AccountFactory()
    threads_count, per_thread = 8, 25
    barrier = threading.Barrier(threads_count)
    errors = []

    def send():
        try:
            barrier.wait()
            for _ in range(per_thread):
                usage_record_increment(account=account)
        except Exception as exc:  # reported below, a thread cannot fail the test itself
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=send) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [count for _, _, count in periods(account)] == [threads_count * per_thread]


def test_plan_limit_allows_sends_below_the_limit(account):
    usage_record_increment(account=account, by=99)
    plan_limit_enforce(account=account)  # free: 100


def test_plan_limit_is_reached_at_the_limit_with_details(account):
    usage_record_increment(account=account, by=100)
    with pytest.raises(PlanLimitReached) as caught:
        plan_limit_enforce(account=account)
    response = exception_handler(caught.value, {})
    assert response.status_code == 402
    assert response.data["code"] == "plan_limit_reached"
    assert response.data["details"] == {"current_period_sends": 100, "monthly_limit": 100}


def test_plan_limit_is_a_soft_cap(account):
    usage_record_increment(account=account, by=100)
    # Sends already scheduled still go out and are still counted...
    usage_record_increment(account=account, by=3)
    # ...and new dispatches stay blocked, with the true count.
    with pytest.raises(PlanLimitReached) as caught:
        plan_limit_enforce(account=account)
    assert caught.value.details == {"current_period_sends": 103, "monthly_limit": 100}


def test_plan_limit_follows_the_accounts_plan(account):
    account.plan = Plan.objects.get(slug="hobby")
    account.save()
    usage_record_increment(account=account, by=4999)
    plan_limit_enforce(account=account)
    usage_record_increment(account=account)
    with pytest.raises(PlanLimitReached) as caught:
        plan_limit_enforce(account=account)
    assert caught.value.details == {"current_period_sends": 5000, "monthly_limit": 5000}


def test_the_limit_counts_the_current_period_only(account):
    usage_record_increment(account=account, at=utc(2020, 1, 5), by=500)
    plan_limit_enforce(account=account)


@pytest.mark.django_db(transaction=True)
def test_the_migration_to_shards_keeps_each_records_count(account):
    """0004 copies each record's count into its shard 0 (none for a record without
    sends), and going back puts the sum in the column again."""
    before = [("billing", "0003_checkout_session")]
    after = [("billing", "0004_usage_count_shards")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        OldRecord = executor.loader.project_state(before).apps.get_model("billing", "UsageRecord")
        used = OldRecord.objects.create(
            account_id=account.pk,
            period_start=utc(2026, 10, 1),
            period_end=utc(2026, 11, 1),
            sends_count=4980,
        )
        unused = OldRecord.objects.create(
            account_id=account.pk,
            period_start=utc(2026, 11, 1),
            period_end=utc(2026, 12, 1),
            sends_count=0,
        )

        executor = MigrationExecutor(connection)
        executor.migrate(after)
        assert list(UsageCount.objects.values_list("record_id", "shard", "sends")) == [
            (used.pk, 0, 4980)
        ]
        assert periods(account) == [
            (utc(2026, 10, 1), utc(2026, 11, 1), 4980),
            (utc(2026, 11, 1), utc(2026, 12, 1), 0),
        ]
        usage_record_increment(account=account, at=utc(2026, 10, 20), by=20)
        usage_record_increment(account=account, at=utc(2026, 11, 20))

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        OldRecord = executor.loader.project_state(before).apps.get_model("billing", "UsageRecord")
        assert dict(OldRecord.objects.values_list("pk", "sends_count")) == {
            used.pk: 5000,
            unused.pk: 1,
        }
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_record_read_again_reads_its_count_again(account):
    """refresh_from_db: the count is the shards' sum, not a column; it is read again
    with the row, or alone when named, and a refresh of other columns leaves it."""
    usage_record_increment(account=account, at=utc(2026, 11, 2), by=2)
    record = UsageRecord.objects.get(account=account)
    usage_record_increment(account=account, at=utc(2026, 11, 3), by=3)

    record.refresh_from_db(fields=["period_end"])
    assert record.sends_count == 2
    record.refresh_from_db()
    assert record.sends_count == 5
    usage_record_increment(account=account, at=utc(2026, 11, 4))
    record.refresh_from_db(fields=["sends_count"])
    assert record.sends_count == 6
