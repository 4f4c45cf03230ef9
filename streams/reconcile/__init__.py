"""The reconciler: finds candidates stuck past the grace window and settles them."""
