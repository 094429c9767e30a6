"""The runtime dispatches on the Poll message's oneof: a lease starts a job, a cancel reaches the
runner, and a kind it does not know (a newer scheduler's) is refused, never guessed at."""

from __future__ import annotations

import logging

import pytest

from runtime_service.settings import RuntimeSettings
from runtime_service.worker import Runtime
from shared.gen.aijob.v1 import runtime_service_pb2 as rt


async def test_an_unknown_message_kind_is_refused_with_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = Runtime(
        RuntimeSettings(
            scheduler_addr="127.0.0.1:9", runtime_token="t", model_base_url="http://127.0.0.1:9"
        )
    )
    cancelled: list[tuple[str, int]] = []

    def cancel(job_id: str, attempt_no: int, **_: object) -> bool:
        cancelled.append((job_id, attempt_no))
        return True

    monkeypatch.setattr(runtime.runner, "cancel", cancel)
    try:
        with caplog.at_level(logging.WARNING, logger="runtime_service.worker"):
            runtime._on_message(rt.PollResponse())  # no kind set: what an unknown kind parses to
        assert [r.getMessage() for r in caplog.records] == ["unknown Poll message refused"]
        assert runtime._tasks == set() and cancelled == []
        runtime._on_message(rt.PollResponse(cancel=rt.CancelNotice(job_id="j-1", attempt_no=2)))
        assert cancelled == [("j-1", 2)]
    finally:
        await runtime.runner.close()
        await runtime._channel.close(None)
