"""What the ``aijob`` command exits with, by outcome (its help lists them)."""

from __future__ import annotations

import grpc

#: The command's description in its help.
HELP = """``aijob``: create, inspect, watch and cancel jobs, and the admin views, from a terminal.

Exit codes scripts can switch on:

    0  ok (watch: the job succeeded)     4  not found
    1  watch: the job failed             5  refused: bad input or wrong state (see the message)
    2  usage error                       6  authentication / permission
    3  watch: the job was cancelled      7  scheduler unreachable or unavailable; 8 other errors
"""

EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED, EXIT_NOT_FOUND, EXIT_REFUSED = 1, 2, 3, 4, 5
EXIT_AUTH, EXIT_UNAVAILABLE, EXIT_OTHER = 6, 7, 8
EXIT_OF_STATUS = {
    grpc.StatusCode.NOT_FOUND: EXIT_NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: EXIT_REFUSED,
    grpc.StatusCode.FAILED_PRECONDITION: EXIT_REFUSED,
    grpc.StatusCode.ALREADY_EXISTS: EXIT_REFUSED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: EXIT_REFUSED,
    grpc.StatusCode.UNAUTHENTICATED: EXIT_AUTH,
    grpc.StatusCode.PERMISSION_DENIED: EXIT_AUTH,
    grpc.StatusCode.UNAVAILABLE: EXIT_UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: EXIT_UNAVAILABLE,
}
EXIT_OF_TERMINAL = {"succeeded": 0, "failed": EXIT_FAILED, "cancelled": EXIT_CANCELLED}
