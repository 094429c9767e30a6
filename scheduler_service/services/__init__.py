"""The use cases: the job API's operations, the runtime protocol (dispatch, reports, the reaper),
billing and flow control, and the background loops. They run against the ports
(:mod:`scheduler_service.ports`), never against SQL, gRPC or the model."""
