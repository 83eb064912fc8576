"""MTC envelope benchmark harness."""
