"""Cloudflare's ``client/v4`` API over ember's control plane (see ``app.create_api_app``)."""
