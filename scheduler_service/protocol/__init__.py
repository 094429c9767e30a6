"""The runtime protocol: leases, heartbeats, results and failures, dispatch and the reaper."""
