"""Rule checks of the mtime family: segment file modification times: resets by reassignment, copies and restores."""
