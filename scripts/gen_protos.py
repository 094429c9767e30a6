"""Regenerate the protobuf/gRPC Python code and .pyi stubs under shared/gen from protos/, and the
job types' JSON Schemas under schemas/ from the registry.

The one way generated code is produced. CI runs it with --check, which fails when the committed
files differ from a fresh generation.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
#: Imported protos we do not generate (their Python code comes with googleapis-common-protos).
THIRD_PARTY = ROOT / "third_party"
OUT = ROOT / "shared" / "gen"
SCHEMAS = ROOT / "schemas"
PACKAGE_PREFIX = "shared.gen."
#: The descriptor set, with source info, written beside the code.
PROTOSET = "aijob.protoset"

# protoc emits `from aijob.v1 import x_pb2`; inside our package it must be absolute.
_IMPORT_RE = re.compile(r"^from aijob\.v1 import", re.MULTILINE)
_PYI_IMPORT_RE = re.compile(r"^import aijob\.v1\.(\w+) as", re.MULTILINE)


def _plugin(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: pip install -e '.[dev]'")
    return found


def generate(out: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{THIRD_PARTY}",
        f"-I{include}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--mypy_grpc_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # The contract with its comments, for server reflection (grpcurl describe shows them) and
    # for clients that load descriptors (grpcurl -protoset, buf curl).
    described = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{THIRD_PARTY}",
        f"-I{include}",
        f"--descriptor_set_out={out / PROTOSET}",
        "--include_source_info",
        "--include_imports",
        *protos,
    ]
    if protoc.main(described) != 0:
        raise SystemExit("protoc failed (descriptor set)")
    _without_json_names(out / PROTOSET)
    for path in out.rglob("*.py*"):
        text = path.read_text()
        text = _IMPORT_RE.sub(f"from {PACKAGE_PREFIX}aijob.v1 import", text)
        text = _PYI_IMPORT_RE.sub(rf"import {PACKAGE_PREFIX}aijob.v1.\1 as", text)
        path.write_text(text)
    for package in (out, out / "aijob", out / "aijob" / "v1"):
        (package / "__init__.py").write_text('"""Generated code: run scripts/gen_protos.py."""\n')


def _without_json_names(protoset: Path) -> None:
    """protoc records every field's JSON name; without them, grpcurl prints and reads the
    ``.proto`` names (``job_id``), as the README's examples and every earlier release do."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet.FromString(protoset.read_bytes())

    def clear(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            for item in message.field:
                item.ClearField("json_name")
            clear(message.nested_type)

    for file in files.file:
        clear(file.message_type)
    protoset.write_bytes(files.SerializeToString(deterministic=True))


def _same_tree(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b, ignore=["__pycache__"])
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        print(f"differs in {a}: {cmp.left_only + cmp.right_only + cmp.diff_files}", file=sys.stderr)
        return False
    return all(_same_tree(a / d, b / d) for d in cmp.common_dirs)


def write_schemas(out: Path) -> None:
    """The JSON Schemas ListJobTypes answers, one file per job type and part."""
    sys.path.insert(0, str(ROOT))
    from scheduler_service.core.job_catalog import schema_files
    from scheduler_service.core.job_registry import default_registry

    out.mkdir(parents=True, exist_ok=True)
    for name, text in schema_files(default_registry()).items():
        (out / name).write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if shared/gen is out of date")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh, schemas = Path(tmp) / "gen", Path(tmp) / "schemas"
        generate_into(fresh)
        write_schemas(schemas)
        if opts.check:
            for made, kept in ((fresh, OUT), (schemas, SCHEMAS)):
                if not kept.exists() or not _same_tree(made, kept):
                    print(
                        f"{kept.relative_to(ROOT)} is stale: run `make proto` and commit",
                        file=sys.stderr,
                    )
                    return 1
            print("shared/gen and schemas/ are up to date")
            return 0
        for made, kept in ((fresh, OUT), (schemas, SCHEMAS)):
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(made, kept)
    print(f"generated into {OUT.relative_to(ROOT)} and {SCHEMAS.relative_to(ROOT)}")
    return 0


def generate_into(out: Path) -> None:
    out.mkdir(parents=True)
    generate(out)


if __name__ == "__main__":
    sys.exit(main())
