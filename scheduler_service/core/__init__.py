"""The pure core: the lifecycle's states and writes as data, retry policy, the job-type
registry, prices, budgets, flow-control rules, validation and the exception root. No I/O: every
module here imports only its neighbours and ``shared``."""
