"""The timeline as pure bookkeeping: order, cancellation, background jobs (domain/timeline.py)."""

from __future__ import annotations

import pytest

from payroll_sandbox.domain.timeline import Timeline


def never_run() -> None:
    raise AssertionError("the timeline hands jobs out; it never runs them")


def pop_labels(timeline: Timeline, now: float) -> list[str]:
    labels = []
    while (job := timeline.pop_due(now)) is not None:
        labels.append(job.label)
    return labels


def test_timeline_pops_jobs_by_due_time_not_by_scheduling_order():
    timeline = Timeline()
    for due, label in [(30, "c"), (10, "a"), (20, "b")]:
        timeline.schedule(due, never_run, label=label)
    assert pop_labels(timeline, now=100) == ["a", "b", "c"]


def test_timeline_jobs_due_at_the_same_time_pop_in_scheduling_order():
    timeline = Timeline()
    for label in ["first", "second", "third"]:
        timeline.schedule(5, never_run, label=label)
    timeline.schedule(4, never_run, label="earlier")
    assert pop_labels(timeline, now=5) == ["earlier", "first", "second", "third"]


def test_timeline_pop_due_returns_nothing_before_the_earliest_due_time():
    timeline = Timeline()
    job = timeline.schedule(10, never_run)
    assert timeline.pop_due(9.999) is None
    assert len(timeline) == 1
    assert timeline.pop_due(10) is job  # due exactly now counts
    assert timeline.pop_due(10) is None


def test_timeline_pop_due_hands_out_only_jobs_due_by_now():
    timeline = Timeline()
    for due in (1, 2, 3, 4):
        timeline.schedule(due, never_run, label=str(due))
    assert pop_labels(timeline, now=2.5) == ["1", "2"]
    assert timeline.next_due() == 3


def test_timeline_next_due_is_none_when_empty():
    assert Timeline().next_due() is None


def test_timeline_cancelled_job_is_never_popped_and_next_due_skips_it():
    timeline = Timeline()
    early = timeline.schedule(1, never_run, label="early")
    timeline.schedule(2, never_run, label="late")
    timeline.cancel(early)
    assert early.cancelled
    assert timeline.next_due() == 2
    assert pop_labels(timeline, now=10) == ["late"]


def test_timeline_cancel_twice_counts_once():
    timeline = Timeline()
    job = timeline.schedule(1, never_run)
    timeline.schedule(2, never_run)
    timeline.cancel(job)
    timeline.cancel(job)
    assert timeline.busy == 1
    assert len(timeline) == 1


def test_timeline_cancel_owned_cancels_only_that_owners_pending_jobs():
    timeline = Timeline()
    mine = [timeline.schedule(due, never_run, owner="task-1", label=f"mine {due}") for due in (1, 2, 3)]
    timeline.schedule(2, never_run, owner="task-2", label="theirs")
    timeline.schedule(2, never_run, label="nobody's")
    timeline.cancel(mine[2])

    assert timeline.cancel_owned("task-1") == 2  # the one already cancelled is not counted again
    assert all(job.cancelled for job in mine)
    assert pop_labels(timeline, now=10) == ["theirs", "nobody's"]
    assert timeline.idle


def test_timeline_cancel_owned_ignores_jobs_already_handed_out():
    timeline = Timeline()
    ran = timeline.schedule(1, never_run, owner="link-1")
    timeline.schedule(5, never_run, owner="link-1")
    assert timeline.pop_due(1) is ran
    assert timeline.cancel_owned("link-1") == 1
    assert not ran.cancelled
    assert timeline.idle


def test_timeline_cancel_owned_of_an_unknown_owner_cancels_nothing():
    timeline = Timeline()
    timeline.schedule(1, never_run, owner="task-1")
    assert timeline.cancel_owned("task-9") == 0
    assert timeline.busy == 1


def test_timeline_background_jobs_do_not_keep_it_busy():
    timeline = Timeline()
    timeline.schedule(1, never_run, background=True)
    assert timeline.idle and timeline.busy == 0
    assert len(timeline) == 1  # still pending, just not keeping the timeline busy

    timeline.schedule(2, never_run)
    assert not timeline.idle and timeline.busy == 1


def test_timeline_becomes_idle_when_its_last_foreground_job_is_popped():
    timeline = Timeline()
    timeline.schedule(1, never_run, label="refresh", background=True)
    timeline.schedule(2, never_run, label="step")
    assert pop_labels(timeline, now=1) == ["refresh"]
    assert not timeline.idle  # a background job leaving does not make it idle
    assert pop_labels(timeline, now=2) == ["step"]
    assert timeline.idle


def test_timeline_cancelling_a_background_job_leaves_busy_alone():
    timeline = Timeline()
    refresh = timeline.schedule(1, never_run, background=True)
    timeline.schedule(2, never_run)
    timeline.cancel(refresh)
    assert timeline.busy == 1
    assert len(timeline) == 1


def test_timeline_cancelling_the_last_foreground_job_makes_it_idle():
    timeline = Timeline()
    job = timeline.schedule(1, never_run)
    timeline.cancel(job)
    assert timeline.idle


def test_timeline_clear_cancels_every_job_and_makes_it_idle():
    timeline = Timeline()
    jobs = [timeline.schedule(1, never_run), timeline.schedule(2, never_run, background=True),
            timeline.schedule(3, never_run, owner="task-1")]
    timeline.clear()
    assert all(job.cancelled for job in jobs)
    assert timeline.idle and timeline.busy == 0
    assert len(timeline) == 0 and timeline.pending() == []
    assert timeline.next_due() is None and timeline.pop_due(100) is None


def test_timeline_is_usable_after_clear():
    timeline = Timeline()
    old = timeline.schedule(1, never_run)
    timeline.clear()
    timeline.cancel(old)  # cancelling a cleared job changes nothing
    timeline.schedule(2, never_run, label="new")
    assert timeline.busy == 1
    assert pop_labels(timeline, now=2) == ["new"]


def test_timeline_pending_lists_live_jobs_in_pop_order():
    timeline = Timeline()
    b = timeline.schedule(2, never_run, label="b")
    a = timeline.schedule(1, never_run, label="a")
    cancelled = timeline.schedule(1.5, never_run, label="cancelled")
    c = timeline.schedule(2, never_run, label="c", background=True)
    timeline.cancel(cancelled)
    assert timeline.pending() == [a, b, c]


def test_timeline_on_schedule_sees_every_new_job():
    timeline = Timeline()
    seen = []
    timeline.on_schedule = seen.append
    job = timeline.schedule(1, never_run, label="step")
    refresh = timeline.schedule(2, never_run, background=True)
    assert seen == [job, refresh]


def test_timeline_schedule_keeps_what_the_job_was_given():
    timeline = Timeline()
    job = timeline.schedule(7.5, never_run, label="step 2 of t1", owner="t1", background=True)
    assert (job.due, job.action, job.label, job.owner, job.background, job.cancelled) == (
        7.5, never_run, "step 2 of t1", "t1", True, False)


def test_timeline_cancelling_a_job_already_handed_out_keeps_it_idle():
    timeline = Timeline()
    job = timeline.schedule(1, never_run)
    assert timeline.pop_due(1) is job
    timeline.cancel(job)
    assert timeline.busy == 0 and timeline.idle
