"""Which of a campaign's mailboxes a new thread goes to, within one claim transaction
of the scheduler (outreach.sending.scheduler): a thread without a mailbox to keep (new,
or its mailbox disabled) rotates over the campaign's mailboxes."""

import functools
import heapq
from collections import Counter


def rank(pk, *, campaign_id, room: dict, claimed: Counter) -> tuple:
    """A mailbox's place in its campaign's rotation (the order of `Rotation`, link order
    aside): the lower the better."""
    left = room[pk]
    return (left <= 0, -claimed[pk, campaign_id], -left)


def rotation_first(usable: list, count: int, *, campaign_id, room: dict, claimed: Counter) -> list:
    """The `count` best of `usable` (in link order) as the rotation ranks them now: the
    mailboxes a claim transaction locks for up to `count` new threads."""
    ranked = [
        (rank(pk, campaign_id=campaign_id, room=room, claimed=claimed), order, pk)
        for order, pk in enumerate(usable)
    ]
    return [pk for _, _, pk in heapq.nsmallest(count, ranked)]


class Rotation:
    """A campaign's mailboxes that a rotating thread may be claimed for in one claim
    transaction (locked, free, authorized), best first:

    1. one with room under its daily limit before one without (the enrollment then waits
       for tomorrow: none has room);
    2. the one that took the most of its share in this run, so that a mailbox's claims of
       a run travel together in one task;
    3. the one with the most room left today;
    4. the first in the campaign's link order.

    None that took its share of the run (`share`, counted in `claimed`) or is paced
    (`paced`) is chosen. `room`, `claimed` and `paced` are the transaction's own, shared
    with its other campaigns and its threads' claims, and kept by the caller: after a
    claim for the mailbox `best()` gave, the caller counts it there, then calls
    `taken()`.

    A heap, kept lazily. Only the mailbox just chosen can get better (its share of the
    run fills), and `taken()` puts it back at once; any other change (room taken by a
    thread's claim or another campaign's, a mailbox paced) only makes a mailbox worse or
    unusable, which `best()` finds when it reaches the top. At a fleet's size a scan of
    every mailbox for each enrollment was the scheduler's cost: 100 enrollments × 3,000
    free mailboxes a transaction at a run's start (bench/README.md, "The scheduler at
    3,000 mailboxes")."""

    def __init__(
        self,
        usable: list,
        *,
        campaign_id,
        share: int,
        room: dict,
        claimed: Counter,
        paced: set,
    ):
        self._campaign_id = campaign_id
        self._share = share
        self._claimed = claimed
        self._paced = paced
        # A mailbox's place now (`rank`), with the transaction's room and claims.
        self._key = functools.partial(rank, campaign_id=campaign_id, room=room, claimed=claimed)
        open_ = [pk for pk in usable if claimed[pk, campaign_id] < share]
        # Mailboxes that have not taken their share of the run, paced ones included.
        self._open = len(open_)
        self._heap = [
            (self._key(pk), order, pk) for order, pk in enumerate(open_) if pk not in paced
        ]
        heapq.heapify(self._heap)

    @property
    def shares_taken(self) -> bool:
        """Every usable mailbox took its share of the run: the campaign's rotating
        threads get no more claims in it."""
        return self._open == 0

    def best(self, held=()):
        """The best mailbox now, or None when each is paced or took its share; with
        `held` (mailboxes paused toward the recipient's provider), the best of the others."""
        heap = self._heap
        while heap:
            key, order, pk = heap[0]
            if pk in self._paced or self._claimed[pk, self._campaign_id] >= self._share:
                heapq.heappop(heap)
                continue
            current = self._key(pk)
            if current != key:  # worse since it was pushed
                heapq.heapreplace(heap, (current, order, pk))
                continue
            if pk not in held:
                return pk
            # Rare (a circuit breaker's pause in force): the best of the rest, by a scan.
            rest = [
                (self._key(other), order, other)
                for _, order, other in heap
                if other not in held
                and other not in self._paced
                and self._claimed[other, self._campaign_id] < self._share
            ]
            return min(rest)[2] if rest else None
        return None

    def taken(self, pk) -> None:
        """`pk`, the mailbox `best()` gave, got a claim (counted in room and claimed)."""
        if self._claimed[pk, self._campaign_id] >= self._share:
            self._open -= 1
        heap = self._heap
        if heap[0][2] == pk:
            heapq.heapreplace(heap, (self._key(pk), heap[0][1], pk))
            return
        # A mailbox best() chose past a held one at the top.
        index = next(i for i, item in enumerate(heap) if item[2] == pk)
        heap[index] = (self._key(pk), heap[index][1], pk)
        heapq.heapify(heap)
