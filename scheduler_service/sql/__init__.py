"""The SQL adapter: the unit of work and every store behind the ports, the statements, the ORM
models (``db/``), the projectors into business tables (``projection/``), migrations, the outbox
dispatcher and the event log. The only package that speaks SQL."""
