"""ember's control plane: accounts, tokens, temporary accounts, scripts, versions, deployments,
secrets, KV namespaces, tails and GC, in one SQLite file (see ``plane.ControlPlane``)."""
