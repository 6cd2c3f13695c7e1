"""The webhook retry schedule on the tenant's clock (webhooks/dispatcher.py; spec: Events,
Delivery; Limits): 3 attempts in total, 30 virtual seconds apart, counted from the start of
the attempt that failed.

The schedule is not a pure function: `Dispatcher._after_attempt` computes it and puts the
next attempt on the tenant's timeline. These tests replace only the network call
(`Dispatcher._post`) with a scripted answer and drive the timeline by hand, so no socket is
opened and the clock moves only when a test moves it.
"""

from __future__ import annotations

from types import SimpleNamespace

from payroll_sandbox.clock import Clock, isoformat
from payroll_sandbox.domain.changes import Changes
from payroll_sandbox.domain.webhooks.events import Event
from payroll_sandbox.domain.identity.identity import Ids
from payroll_sandbox.domain.timeline import Timeline
from payroll_sandbox.domain.webhooks.outbox import DELIVERED, FAILED, Answer
from payroll_sandbox.transport.dispatcher import Dispatcher

T0 = 1_780_000_000.0
URL = "http://receiver.invalid/hooks"
EVENT = Event(id="evt-1", type="task-status-updated", time=T0,
              body={"eventType": "task-status-updated", "data": {"status": "completed"}},
              sequence=1)


class ScriptedDispatcher(Dispatcher):
    """A dispatcher whose endpoint answers from a list of statuses (the last one repeats)."""

    def __init__(self, statuses: list[int]) -> None:
        super().__init__(vendor="atomic", timeout=0.5, seed=1)
        self.statuses = statuses
        self.posted: list[int] = []

    async def _post(self, url, message, left) -> Answer:
        status = self.statuses[min(len(self.posted), len(self.statuses) - 1)]
        self.posted.append(len(self.posted) + 1)
        return Answer(left, status, None if 200 <= status < 300 else
                      f"non-2xx response {status}", 1.0)


def tenant(dispatcher: Dispatcher) -> SimpleNamespace:
    """The parts of a Tenant the dispatcher reads."""
    account = SimpleNamespace(name="acme", webhook_endpoints=[{"url": URL}], ids=Ids("acme"),
                              clock=Clock(mode="manual", start=T0), timeline=Timeline(),
                              api_secret="secret", account_signing=True, changes=Changes())
    account.webhooks = dispatcher.outbox_for(account)
    return account


async def deliver(statuses: list[int]):
    dispatcher = ScriptedDispatcher(statuses)
    account = tenant(dispatcher)
    [delivery] = account.webhooks.deliver(EVENT)
    await dispatcher.settle(account)
    return dispatcher, account, delivery


async def run_next(dispatcher, account, *, at: float | None = None) -> None:
    """Run the next job on the timeline, at its due time or later (`at`)."""
    due = account.timeline.next_due()
    account.clock.advance_to(due if at is None else at)
    job = account.timeline.pop_due(account.clock.timestamp())
    job.action()
    await dispatcher.settle(account)


async def run_all(dispatcher, account) -> None:
    while account.timeline.next_due() is not None:
        await run_next(dispatcher, account)


async def test_retry_schedule_three_attempts_thirty_seconds_apart_then_failed():
    dispatcher, account, delivery = await deliver([500])
    await run_all(dispatcher, account)
    assert [isoformat(a.time) for a in delivery.attempts] == [isoformat(T0), isoformat(T0 + 30),
                                                   isoformat(T0 + 60)]
    assert [a.number for a in delivery.attempts] == [1, 2, 3]
    assert delivery.state == FAILED and delivery.next_attempt_at is None
    assert account.timeline.idle and len(account.timeline) == 0


async def test_retry_schedule_failed_attempt_puts_the_next_one_thirty_seconds_later():
    dispatcher, account, delivery = await deliver([503, 200])
    [retry] = account.timeline.pending()
    assert retry.due == T0 + 30
    assert retry.owner == f"delivery:{delivery.id}"
    assert delivery.next_attempt_at == isoformat(T0 + 30)
    # A pending retry keeps the tenant busy: run-until-idle waits for it.
    assert not account.timeline.idle and not retry.background


async def test_retry_schedule_stops_at_the_first_2xx():
    dispatcher, account, delivery = await deliver([500, 204])
    await run_all(dispatcher, account)
    assert [a.status for a in delivery.attempts] == [500, 204]
    assert delivery.state == DELIVERED and delivery.next_attempt_at is None
    assert account.timeline.idle and len(account.timeline) == 0


async def test_retry_schedule_first_attempt_delivered_schedules_nothing():
    dispatcher, account, delivery = await deliver([200])
    assert delivery.state == DELIVERED and len(delivery.attempts) == 1
    assert account.timeline.next_due() is None


async def test_retry_schedule_counts_from_the_start_of_a_late_attempt():
    dispatcher, account, delivery = await deliver([500])
    await run_next(dispatcher, account, at=T0 + 45)  # the clock jumped past the retry's due time
    assert isoformat(delivery.attempts[1].time) == isoformat(T0 + 45)
    assert account.timeline.next_due() == T0 + 75


async def test_retry_schedule_each_attempt_is_posted_once():
    dispatcher, account, delivery = await deliver([500])
    await run_all(dispatcher, account)
    assert dispatcher.posted == [1, 2, 3]
