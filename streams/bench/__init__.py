"""Benchmarks a user can run (``dcb bench``): the commit path against raw Kafka."""
