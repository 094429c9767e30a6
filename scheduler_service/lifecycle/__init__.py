"""Job lifecycle: the pure state machine and the repository that is its only writer."""
