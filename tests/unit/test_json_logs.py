"""The JSON log lines: ids stay JSON (a group commit's line names its jobs as a list), anything
else is written as its string."""

from __future__ import annotations

import json
import logging

from shared.logs import JsonFormatter


def _line(**extra: object) -> dict[str, object]:
    record = logging.makeLogRecord({"msg": "results accepted", "levelname": "INFO", **extra})
    return dict(json.loads(JsonFormatter("scheduler").format(record)))


def test_a_list_of_ids_is_a_json_list() -> None:
    line = _line(jobIds=["a", "b"], count=2)
    assert (line["jobIds"], line["count"], line["msg"]) == (["a", "b"], 2, "results accepted")


def test_other_values_are_written_as_strings() -> None:
    assert _line(thing={"x": 1})["thing"] == "{'x': 1}"
    assert _line(mixed=["a", {"b": 1}])["mixed"] == "['a', {'b': 1}]"
