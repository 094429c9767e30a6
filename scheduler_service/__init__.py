"""The scheduler: job lifecycle, outbox and the gRPC APIs over one SQL database."""
