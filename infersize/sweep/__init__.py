"""The sweep engine: YAML grids expanded, scored in parallel chunks, reduced to frontier tables."""
