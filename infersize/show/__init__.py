"""Rendering: the terminal (rich), figures (matplotlib, Agg) and the HTML report. Renders
results it is given; computes nothing."""
