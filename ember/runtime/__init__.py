"""Worker runtime: config, router, supervisor, isolates, limits, deployments (control plane).

Never imports torch: isolates are forked from a zygote that must stay small.
"""
