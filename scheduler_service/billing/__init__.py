"""What model calls cost, what users may spend, and what they spent."""
