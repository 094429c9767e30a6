"""Settings, read once from the environment, and the application that wires the stores, services
and loops together."""
