"""The transactional outbox: events written with the state change they announce."""
