"""Capacity sweeps, the batch side: the YAML keys (schema), the workloads and SLAs resolved at
planning (plan), the rows a chunk asks (rows: each a `capacity --draft-k auto` request, answered
by service/capacity/screen.py), the capacity table (table, its columns) and the fewest GPUs for a
load read back from it (best). Import from the modules; the face names them only."""
