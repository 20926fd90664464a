"""Pure domain: no I/O, no clock reads, no Jupyter imports."""
