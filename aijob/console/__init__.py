"""The operators' console: server-rendered pages over the admin API, served by
``aijob console`` (``AIJOB_CONSOLE_LISTEN``). It talks to the scheduler only over gRPC, through
:mod:`aijob.client`, with the token an operator signs in with (an admin token acts, a viewer
token reads); the scheduler decides what each token may do and records every action in its
audit log."""
