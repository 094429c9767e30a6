"""Job lifecycle: the pure state machine and write table, and the job store that applies them."""
