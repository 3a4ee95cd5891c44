"""infersize: size speculative decoding (joint GPU memory of target + draft, and the speedup)."""

__version__ = "0.1.0"
