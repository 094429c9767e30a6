"""The runtime's sending side of batched frames (shared/poll_frames.py): what is ready together
goes in one frame, a lone message is never held, and no frame outgrows its bound."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from shared.gen.aijob.v1 import runtime_service_pb2 as rt
from shared.poll_frames import (
    FRAME_BYTES,
    FRAME_ITEMS,
    chunked,
    coalesce,
    end_requests,
    outgoing_frames,
    outgoing_messages,
)


def _report(report_id: int, output: str = "{}") -> rt.PollRequest:
    result = rt.SubmitResultRequest(job_id=f"job-{report_id}", attempt_no=1, output_json=output)
    return rt.PollRequest(report=rt.PollReport(report_id=report_id, result=result))


def _credit(slots: int = 1) -> rt.PollRequest:
    return rt.PollRequest(credit=rt.PollCredit(slots=slots))


def _keepalive() -> rt.PollRequest:
    return rt.PollRequest(keepalive=rt.PollKeepalive())


def test_reports_ready_together_go_in_one_frame_and_credits_are_summed() -> None:
    frames = coalesce([_report(1), _credit(), _report(2), _keepalive(), _credit(2), _report(3)])

    assert [f.WhichOneof("kind") for f in frames] == ["report_batch", "credit"]
    assert [r.report_id for r in frames[0].report_batch.reports] == [1, 2, 3]
    assert frames[1].credit.slots == 3


def test_a_keepalive_goes_only_when_nothing_else_does() -> None:
    assert [f.WhichOneof("kind") for f in coalesce([_keepalive(), _keepalive()])] == ["keepalive"]
    assert [f.WhichOneof("kind") for f in coalesce([_keepalive(), _credit()])] == ["credit"]


def test_reports_already_batched_are_merged_in_order() -> None:
    batch = rt.PollRequest(
        report_batch=rt.ReportBatch(reports=[_report(2).report, _report(3).report])
    )
    (frame,) = coalesce([_report(1), batch, _report(4)])
    assert [r.report_id for r in frame.report_batch.reports] == [1, 2, 3, 4]


@given(st.lists(st.integers(min_value=0, max_value=FRAME_BYTES // 3), max_size=12))
def test_frames_keep_their_order_and_stay_under_the_bound(sizes: list[int]) -> None:
    reports = [_report(i, "x" * size).report for i, size in enumerate(sizes)]
    runs = list(chunked(reports))

    assert [r.report_id for run in runs for r in run] == list(range(len(sizes)))
    for run in runs:
        assert len(run) == 1 or sum(r.ByteSize() for r in run) <= FRAME_BYTES


def test_a_frame_holds_at_most_frame_items() -> None:
    reports = [_report(i).report for i in range(FRAME_ITEMS + 1)]
    assert [len(run) for run in chunked(reports)] == [FRAME_ITEMS, 1]


def test_an_item_larger_than_the_bound_travels_alone() -> None:
    big = _report(1, "x" * (FRAME_BYTES + 10)).report
    runs = list(chunked([_report(0).report, big, _report(2).report]))
    assert [[r.report_id for r in run] for run in runs] == [[0], [1], [2]]


async def test_a_lone_report_is_not_held_for_the_window() -> None:
    queue: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
    # A window no test could sit out: the lone report must go without it.
    frames = outgoing_frames(queue, window_s=3600)
    queue.put_nowait(_report(1))

    frame = await asyncio.wait_for(anext(frames), 30)

    assert [r.report_id for r in frame.report_batch.reports] == [1]
    await frames.aclose()


async def test_a_burst_waits_the_window_and_takes_what_came_meanwhile() -> None:
    queue: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
    frames = outgoing_frames(queue, window_s=0.001)
    queue.put_nowait(_report(1))
    queue.put_nowait(_report(2))
    first = asyncio.ensure_future(anext(frames))
    # The burst's frame cannot go before the window has passed, so this joins it.
    await asyncio.sleep(0)
    queue.put_nowait(_report(3))

    frame = await asyncio.wait_for(first, 30)

    assert [r.report_id for r in frame.report_batch.reports] == [1, 2, 3]
    await frames.aclose()


async def test_the_frames_end_after_what_was_put_before_their_end() -> None:
    queue: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
    for request in (_report(1), _report(2), _credit(2)):
        queue.put_nowait(request)
    end_requests(queue)
    queue.put_nowait(_report(3))  # after the end: never sent

    # A window no test could sit out: the end does not wait for the rest of a burst.
    frames = [frame async for frame in outgoing_frames(queue, window_s=3600)]

    assert [f.WhichOneof("kind") for f in frames] == ["report_batch", "credit"]
    assert [r.report_id for r in frames[0].report_batch.reports] == [1, 2]


async def test_the_single_messages_end_after_what_was_put_before_their_end() -> None:
    queue: asyncio.Queue[rt.PollRequest] = asyncio.Queue()
    queue.put_nowait(_report(1))
    end_requests(queue)

    messages = [message async for message in outgoing_messages(queue)]

    assert [m.report.report_id for m in messages] == [1]
