"""Native CPU kernels compiled on first use (``build.py``), each with a torch reference path."""
