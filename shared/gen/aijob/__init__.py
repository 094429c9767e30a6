"""Generated code: run scripts/gen_protos.py."""
