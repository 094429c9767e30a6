"""A client runtime and a scheduler-process launcher, shared by the tests and the benchmarks.

Not used by the services: it drives them from outside, over real gRPC and real processes.
"""
