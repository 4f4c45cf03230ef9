"""Value types of dcb-streams (pure: no Kafka imports)."""
