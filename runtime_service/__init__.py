"""The heavy runtime: leases jobs over Poll and runs them against the model."""
