"""The issuance ledger: one service's allocator, its in-flight attempts and the closed prefix."""
