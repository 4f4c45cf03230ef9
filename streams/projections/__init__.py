"""Projections: folds of ``dcb.events`` into read models, gated on closed-prefix certificates.

The rules are pure (``api``, ``certificate_gate``, ``gate``, ``safe_window``, ``outcomes``,
``checkpoint``); ``runner`` is the Kafka shell around them (``dcb project``).
"""
