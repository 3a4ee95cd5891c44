"""The maths: parameter counts, memory, step times, speculative decoding, and the one
`evaluate()` of a deployment over arrays. Pure: no I/O, no terminal, no tables, no workers."""
