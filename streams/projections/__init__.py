"""Projections: folds of ``dcb.events`` into read models, gated on closed-prefix certificates.

The rules are pure (``api``, ``certificates``, ``gate``, ``safe_window``, ``outcomes``,
``checkpoint``, ``lag``, ``row_format``, ``core``); ``runner`` is the Kafka shell around
them (``dcb project``), with ``http`` and ``metrics``.
"""
