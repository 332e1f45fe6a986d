"""kb bench: time attention backends, the separation rule, transfer cost, measurement records."""
