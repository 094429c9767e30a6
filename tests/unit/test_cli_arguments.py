"""The CLI's JSON arguments (``--snapshot``, ``--params``): a missing file or malformed JSON is
a usage error that says where, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from aijob.cli.parser import build_parser


def _refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["create", "synthetic_echo", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_json_arguments_are_refused_with_where_and_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.json"
    assert _refusal(capsys, "--snapshot", f"@{missing}").endswith(
        f"cannot read {missing}: No such file or directory"
    )
    assert _refusal(capsys, "--snapshot", '{"a": 1,}').endswith(
        "is not JSON: Expecting property name enclosed in double quotes at line 1 column 9"
    )
    assert _refusal(capsys, "--params", "[1]").endswith("is not a JSON object")
    good = tmp_path / "snapshot.json"
    good.write_text('{"text": "hello"}')
    args = build_parser().parse_args(["create", "synthetic_echo", "--snapshot", f"@{good}"])
    assert args.snapshot == {"text": "hello"}
