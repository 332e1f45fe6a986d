"""Query solving: three-valued conditions, the KV-cache memory model, and the solver."""
