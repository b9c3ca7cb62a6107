"""Bindings: forged binding names and namespaces in call frames, KV floods, fetch() to the
platform's own network (the supervisor makes subrequests, so this is the SSRF path).

The AI binding is not on this branch's main yet: the binding-call flood here uses KV (the same
call path: a Call frame per operation, counted and bounded per request and per isolate).
"""

from __future__ import annotations

import hashlib
import socket

from tests.security.handlers import handler
from tests.security.platform import B_NAMESPACE, Guard, Platform

ATTACKER_KV = "kv_namespaces:\n  - binding: KV\n    id: ns-attacker\n"

FORGED = handler(
    """
    import workers

    async def attempt(awaitable):
        try:
            return "ok: " + repr(await awaitable)[:200]
        except BaseException as exc:
            return type(exc).__name__ + ": " + str(exc)[:300]

    async def attack(request, env):
        victim = request.headers["x-victim"]
        port = int(request.headers["x-port"])
        call = env.KV._channel.call  # the raw call frame: any binding name, any arguments
        put = ["pwned", b"pwned", None, None, None]
        return report(
            namespace_keyword=await attempt(env.KV.put("pwned", "pwned", namespace=victim)),
            binding_of_b=await attempt(call("KV_B", "put", put)),
            namespace_as_binding=await attempt(call(victim, "put", put)),
            extra_argument=await attempt(call("KV", "put", put + [victim])),
            key_as_object=await attempt(call("KV", "put", [{"namespace": victim}] + put[1:])),
            unknown_method=await attempt(call("KV", "put_namespace", [victim] + put)),
            dot_dot_key=await attempt(env.KV.put("..", "pwned")),
            huge_key=await attempt(env.KV.put("k" * (1 << 20), "pwned")),
            traversal_key=await attempt(env.KV.put(f"../{victim}/pwned", "pwned")),
            fetch_loopback=await attempt(workers.fetch(f"http://127.0.0.1:{port}/")),
            fetch_raw=await attempt(call("__fetch__", "fetch",
                                         ["GET", f"http://127.0.0.1:{port}/", [], "follow", None])),
        )
    """
)

FLOOD = handler(
    """
    async def attack(request, env):
        if request.headers["x-attack"] == "sequential":
            done, error = 0, ""
            try:
                for index in range(1100):
                    await env.KV.get(f"flood-{index}")
                    done += 1
            except Exception as exc:
                error = str(exc)
            return report(done=done, error=error)
        writes = [env.KV.put(f"flood-{index}", "x") for index in range(100)]
        reads = [env.KV.get(f"flood-{index}") for index in range(1400)]
        results = await asyncio.gather(*writes, *reads, return_exceptions=True)
        errors = sorted({str(r) for r in results if isinstance(r, BaseException)})
        return report(ok=sum(not isinstance(r, BaseException) for r in results), errors=errors)
    """
)


def _only_b_wrote_b(platform: Platform) -> None:
    """Every key in B's namespace is one B's writer put there, with B's value."""
    for key, value in platform.stored(B_NAMESPACE).items():
        assert value == hashlib.sha256(key.encode()).hexdigest().encode(), key


def test_forged_binding_names_and_namespaces_reach_nothing(guard: Guard) -> None:
    platform = guard.platform
    attacker = guard.attacker(FORGED, config=ATTACKER_KV)
    attacker.warm()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        headers = {"x-victim": B_NAMESPACE, "x-port": str(listener.getsockname()[1])}
        reply = attacker.attack("forge", headers=headers)
        try:
            listener.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
    assert reply.status_code == 200, reply.text
    result = reply.json()
    # a TypeError that is also a JsException (tests/runtime/test_js_exceptions.py)
    assert result["namespace_keyword"].startswith("JsTypeError"), result
    for name in ("binding_of_b", "namespace_as_binding"):
        assert result[name].startswith("BindingError: env has no binding named"), result
    for name, status in (
        ("extra_argument", "400"),
        ("key_as_object", "400"),
        ("unknown_method", "400"),
        ("dot_dot_key", "400"),
        ("huge_key", "414"),
    ):
        assert result[name].startswith("ServiceError: KV "), (name, result[name])
        assert f" failed: {status} " in result[name], (name, result[name])
    assert result["traversal_key"] == "ok: None"  # a key is opaque: it lands in A's namespace
    for name in ("fetch_loopback", "fetch_raw"):
        assert "network policy" in result[name], result[name]
    assert not reached, "a subrequest reached a loopback listener of the platform's host"
    _only_b_wrote_b(platform)
    assert "../ns-canary-b/pwned" in platform.stored("ns-attacker")
    attacker.served_again()


def test_kv_floods_are_bounded_per_request(guard: Guard) -> None:
    attacker = guard.attacker(FLOOD, config=ATTACKER_KV, cpu_ms=2_000, wall_ms=20_000)
    attacker.warm()
    sequential = attacker.attack("sequential").json()
    assert sequential["done"] == 1000, sequential
    assert "429 Too many API requests by single worker invocation" in sequential["error"]
    concurrent = attacker.attack("concurrent").json()
    assert concurrent["ok"] <= 1000, concurrent
    assert concurrent["errors"], concurrent
    assert all("429" in e or "concurrent calls" in e for e in concurrent["errors"]), concurrent
    _only_b_wrote_b(guard.platform)
    attacker.served_again()
