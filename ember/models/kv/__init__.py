"""The paged KV cache: layout and capacity (``spec``), storage (``pool``), FP8 (``fp8``) and the
integrity sidecar (``integrity``).

Shape letters: ``L`` layers, ``N`` slots (pages x page_size), ``W`` cached elements per token per
layer (K|V for GQA, latent|rope for MLA), ``Di`` indexer key dim.
"""
