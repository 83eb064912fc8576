"""Round-based I/O time prediction."""
