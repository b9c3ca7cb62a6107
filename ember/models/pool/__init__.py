"""The model pool: per model id, one or more replicas behind one HTTP protocol.

A replica is an ember model server (``ember models serve``, CPU or ``cuda:N``) or an SGLang server
(``python -m sglang.launch_server``), launched by the pool with the matching flags, or a server
already running somewhere, attached by URL. The pool speaks only HTTP to them (OpenAI-compatible
``/v1/chat/completions`` with SSE, ``/v1/models``, ``/health``, ``/metrics``), so it is torch-free
and never cares which engine answers.

    config.py     PoolConfig: which replicas, backends, devices and flags serve each model id
    launch.py     the command line of a launched replica (ember or SGLang)
    process.py    a launched replica's process: start, output capture, stop
    replica.py    one replica as admission sees it: leases, room, state, status
    supervision.py  a replica's states; start, health checks, restart after a crash
    health.py     a replica's /health probes and the model name it serves under
    lease.py      one request's hold on a replica's slots
    start_failure.py  why a replica's latest start failed, and when it is tried next
    admission.py  one model's slots: least outstanding work, session affinity, bounded queue
    sessions.py   session affinity's pins, per account and value, bounded per account
    upstream.py   one request to a replica: JSON or a stream of SSE events
    wire.py       a lean HTTP/1.1 client for replica streams
    pool.py       ModelPool: the models, lazy or eager start, requests, shutdown, drain
    status.py     ModelStatus: what ``ember ai models`` shows of each model (mixed into ModelPool)
    pooled_stream.py  a replica's event stream that holds its slot until it ends
    errors.py     failures, each carrying its Workers AI error code
"""
