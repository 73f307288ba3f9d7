"""Rule checks of the capacity family: when the filesystem under a log dir fills, and what retention holds at steady state."""
