"""The top-level keys of a project's config: the binding types wrangler knows, and the other
keys ember reads or may safely ignore (``ember.config`` warns about any key in neither)."""

from __future__ import annotations

# Top-level keys that wrangler knows as binding types (the bindings among its not-inheritable
# keys, config_env.NOT_INHERITABLE_KEYS, plus module blobs). Every key that is not in
# KNOWN_KEYS goes to the binding registry: registered types are parsed, these are rejected as
# unsupported (with the list of supported ones), anything else is reported as an unexpected
# field. A binding key missing here would only be warned about, and the worker would then fail
# on first use of the binding, far from the cause.
BINDING_KEYS = frozenset(
    {
        "kv_namespaces",
        "ai",
        "r2_buckets",
        "d1_databases",
        "durable_objects",
        "queues",
        "services",
        "vectorize",
        "hyperdrive",
        "analytics_engine_datasets",
        "browser",
        "dispatch_namespaces",
        "mtls_certificates",
        "send_email",
        "workflows",
        "version_metadata",
        "images",
        "pipelines",
        "secrets_store_secrets",
        "unsafe",
        "ratelimits",
        "containers",
        "wasm_modules",
        "text_blobs",
        "data_blobs",
        "worker_loaders",
        "vpc_services",
        "vpc_networks",
        "media",
        "stream",
        "ai_search",
        "ai_search_namespaces",
        "agent_memory",
        "artifacts",
        "flagship",
        "unsafe_hello_world",
        "websearch",
    }
)
# Keys wrangler knows that ember reads or safely ignores; anything else gets a warning.
KNOWN_KEYS = frozenset(
    {
        "name",
        "main",
        "compatibility_date",
        "compatibility_flags",
        "vars",
        "triggers",
        "limits",
        "dev",
        "$schema",
        "account_id",
        "workers_dev",
        "routes",
        "route",
        "observability",
        "python_modules",
        "build",
        "rules",
        "no_bundle",
        "minify",
        "env",
        "placement",
        "tail_consumers",
        "logpush",
        "upload_source_maps",
        "keep_vars",
        "send_metrics",
        "find_additional_modules",
        "base_dir",
        "preserve_file_names",
        "usage_model",
        "migrations",
        "preview_urls",
        "assets",  # ember.config_assets: Workers Static Assets
    }
)
