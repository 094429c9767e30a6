"""What develops, tests and measures the product but is not part of it.

The scripted OpenAI-compatible model server, the local stack behind ``make run``, and the harness
the tests and benchmarks share (a runtime client, process launchers, a Galera launcher, fixed test
tokens). It is used from the checkout only: the wheel and the Docker image leave it out.
"""
