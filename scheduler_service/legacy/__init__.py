"""System A beside the engine and past it: adopting its job types (M-AI-04) and the
contract step (M-AI-05, M-AI-08). docs/operations/legacy-migration.md is the runbook."""
