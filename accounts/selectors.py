from datetime import datetime

from django.db.models import Sum

from accounts.models import Account, ApiKey, ApiRequestCount


def api_request_counts(*, account: Account, start: datetime, end: datetime) -> dict[str, int]:
    """Authenticated requests of the account in [start, end), by client_kind.

    Counted by the hour: a period boundary inside an hour attributes that hour's
    requests to the period the hour starts in.
    """
    counts = dict.fromkeys(ApiKey.ClientKind.values, 0)
    rows = (
        ApiRequestCount.objects.filter(account=account, hour__gte=start, hour__lt=end)
        .values("client_kind")
        .annotate(total=Sum("count"))
    )
    for row in rows:
        counts[row["client_kind"]] = row["total"]
    return counts
