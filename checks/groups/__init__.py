"""Rule checks of the groups family: consumer groups read from __consumer_offsets: offsets below the log start, on partitions that no longer exist, time until unread data is deleted."""
