"""Rule checks of the integrity family: the files themselves: CRC failures, truncation, offset gaps, indexes that disagree with the log."""
