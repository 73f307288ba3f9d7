"""Rule checks of the timestamps family: record timestamps: out of bounds, going backwards, missing (magic 0)."""
