"""Views on the KB: library functions that return plain data for `kb show/list/graph/stats/matrix`."""
