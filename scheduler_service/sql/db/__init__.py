"""SQL adapters: schema, engine, the database clock and the transaction retry wrapper."""
