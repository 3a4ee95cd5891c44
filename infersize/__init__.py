"""infersize: size speculative decoding (joint GPU memory of target + draft, and the speedup)."""

__version__ = "0.2.0"
