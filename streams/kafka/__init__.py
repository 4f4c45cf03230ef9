"""Everything that configures or talks to Kafka lives here, and nowhere else."""
