"""What handlers see on ``env``: each binding is a client (in the isolate) and a service (in the
supervisor, owning the state)."""
