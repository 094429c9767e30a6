"""LLM flow control: model keys, their limits, and congestion."""
