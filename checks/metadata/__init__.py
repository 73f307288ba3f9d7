"""Rule checks of the metadata family: the log dirs against the cluster's metadata log: replicas absent or in the wrong log dir, stray dirs, topic configs."""
