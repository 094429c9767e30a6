"""The gRPC adapter: servicers, the error-to-status mapping and the server."""
