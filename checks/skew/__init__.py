"""Rule checks of the skew family: bytes unevenly spread: partitions within a topic, brokers and log dirs."""
