"""Tag tables: one consistency boundary's installed events, reservations and tombstones."""
