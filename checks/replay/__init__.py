"""Rule checks of the replay family: what a seek to a time returns, per partition, on both ListOffsets lookups."""
