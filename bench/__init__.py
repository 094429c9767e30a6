"""Benchmarks: scripts that print measurements, never timed tests."""
