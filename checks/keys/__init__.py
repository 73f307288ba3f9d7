"""Rule checks of the keys family: record keys and the partitioners behind them: a key split across partitions, two partitioners on one topic."""
