"""Helpers the tests share: databases, schedulers in-process, fakes, ledgers, process launchers."""
