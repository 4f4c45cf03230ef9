"""Launchers for the embedded defaults (the Kafka broker; later Connect and PostgreSQL)."""
