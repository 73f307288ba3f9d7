"""Rule checks of the retention family: retention that cannot or did not run: future timestamps blocking it, segments overdue."""
