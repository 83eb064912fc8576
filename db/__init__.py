"""SQLite store: schema, ingest of shim logs, reports."""
