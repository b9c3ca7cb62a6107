"""What real Python Workers code calls, run in one deployed worker, one probe per row.

Each row is the body of a small handler written the way scripts for the platform write it
(``await (await fetch(url)).json()``, ``to_js(b).buffer``, ``request.headers.items()``...) and
the value the platform gives for it (Cloudflare's runtime SDK, Pyodide's FFI, the Fetch
standard). One worker holds every probe, so a row costs one request, not one deploy; a second
worker (``ECHO``) answers the probes' subrequests.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.runtime.harness import Harness, write_project

ECHO = """
import json
from workers import Response, WorkerEntrypoint

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = request.url.split("/", 3)[-1]
        if path == "array":
            return Response.json([1, {"a": None}])
        if path == "object":
            return Response.json({"items": [1, 2], "name": "x"})
        body = await request.text()
        sent = {k: v for k, v in request.headers.items() if k.startswith("x-p")}
        return Response(json.dumps([request.method, sent, body]), headers={"x-echo": "1"})
"""

# (name, handler body, repr of the value it returns on the platform)
VALUES: list[tuple[str, str, str]] = [
    # --- workers.fetch / js.fetch results
    ("fetch_json_object", "return (await (await fetch(echo('object'))).json())['name']", "'x'"),
    (
        "fetch_json_array_to_py",
        "from js import fetch as jf\nreturn (await (await jf(echo('array'))).json()).to_py()",
        "[1, {'a': None}]",
    ),
    (
        "fetch_json_attr_and_to_py",
        "data = await (await fetch(echo('object'))).json()\nreturn data.to_py()['items']",
        "[1, 2]",
    ),
    (
        "fetch_props",
        "r = await fetch(echo('x'))\nreturn (r.ok, r.status, r.headers.get('x-echo'), "
        "r.headers.get('x-missing'))",
        "(True, 200, '1', None)",
    ),
    (
        "fetch_kwargs",
        "r = await fetch(echo('x'), method='POST', body='hi', headers={'x-p': '1', **HDR})\n"
        "return await r.text()",
        '\'["POST", {"x-p": "1"}, "hi"]\'',
    ),
    (
        "fetch_request_new",
        "req = Request.new(echo('x'), method='PUT', body='b', headers={'x-p': '2', **HDR})\n"
        "return await (await fetch(req)).json()",
        "['PUT', {'x-p': '2'}, 'b']",
    ),
    (
        "fetch_array_buffer_to_bytes",
        "r = await fetch(echo('array'))\nreturn (await r.arrayBuffer()).to_bytes()",
        "b'[1,{\"a\":null}]'",
    ),
    ("fetch_bytes", "return await (await fetch(echo('array'))).bytes()", "b'[1,{\"a\":null}]'"),
    (
        "fetch_clone",
        "r = await fetch(echo('array'))\nc = r.clone()\nreturn (await r.text(), await c.text())",
        "('[1,{\"a\":null}]', '[1,{\"a\":null}]')",
    ),
    (
        "fetch_body_stream",
        "r = await fetch(echo('array'))\nreturn b''.join([c async for c in r.body])",
        "b'[1,{\"a\":null}]'",
    ),
    (
        "fetch_raise_for_status_ok",
        "r = await fetch(echo('x'))\nr.raise_for_status()\nreturn r.status",
        "200",
    ),
    # --- the incoming request
    (
        "request_basics",
        "return (request.method, request.url.endswith('/request_basics'))",
        "('POST', True)",
    ),
    ("request_missing_header", "return request.headers.get('x-nope')", "None"),
    (
        "request_headers_items",
        "return [k for k, _ in request.headers.items() if k.startswith('x-p')]",
        "['x-pa', 'x-pb']",
    ),
    ("request_headers_subscript", "return request.headers['X-PB']", "'2'"),
    ("request_json_to_py", "return (await request.json()).to_py()", "[1, {'a': None}]"),
    (
        "request_clone",
        "c = request.clone()\nreturn (await c.text(), await request.text())",
        "('[1, {\"a\": null}]', '[1, {\"a\": null}]')",
    ),
    ("request_js_object", "return request.js_object.method", "'POST'"),
    ("request_cf", "return type(request.cf.get('country')).__name__", "'str'"),
    # --- Headers
    (
        "headers_new_items",
        "h = Headers.new({'b': '1', 'a': '2'}.items())\nreturn list(h.items())",
        "[('a', '2'), ('b', '1')]",
    ),
    (
        "headers_to_js",
        "h = Headers.new(to_js({'x': '1'}, dict_converter=Object.fromEntries))\nreturn h.get('X')",
        "'1'",
    ),
    # --- Response objects as handlers read them
    (
        "response_props",
        "r = Response('x', status=201)\nreturn (r.ok, r.status, r.status_text)",
        "(True, 201, 'Created')",
    ),
    ("response_json_read", "return await Response.json({'a': 1}).json()", "{'a': 1}"),
    ("response_from_json", "return (await Response.from_json([1]).text())", "'[1]'"),
    (
        "response_raise_for_status",
        "try:\n    Response('x', status=404).raise_for_status()\nexcept OSError as e:\n"
        "    return '404' in str(e)",
        "True",
    ),
    # --- pyodide.ffi
    (
        "ffi_jsnull",
        "from pyodide.ffi import jsnull\nreturn (jsnull is None, bool(jsnull))",
        "(True, False)",
    ),
    ("ffi_to_js_dict", "return to_js({'a': 1}, dict_converter=Object.fromEntries)", "{'a': 1}"),
    ("ffi_to_js_bytes_buffer", "return bytes(to_js(b'ab').buffer)", "b'ab'"),
    (
        "ffi_to_py_is_a_method",
        "try:\n    from pyodide.ffi import to_py  # noqa: F401\nexcept ImportError as e:\n"
        "    return 'method' in str(e)",
        "True",
    ),
    (
        "ffi_create_proxy_object",
        "class H:\n    def element(self, e):\n        return e * 2\n"
        "p = create_proxy(H())\nv = p.element(2)\np.destroy()\nreturn v",
        "4",
    ),
    # --- js globals
    ("js_json", "import js\nreturn js.JSON.parse(js.JSON.stringify({'a': [1]}))", "{'a': [1]}"),
    # JSON.stringify(v, None, 2) indents as JS does (Cloudflare's cf-object example); an
    # object with no own enumerable properties (a form's File, a Request) is {} in JS.
    (
        "js_json_indent",
        "import js\nreturn js.JSON.stringify({'a': [1], 'b': {}, 'c': []}, None, 2)",
        repr('{\n  "a": [\n    1\n  ],\n  "b": {},\n  "c": []\n}'),
    ),
    (
        "js_json_opaque_objects",
        "import js\nreturn js.JSON.stringify({'f': js.File(b'x', 'a.txt'), 'r': request, 'n': 1})",
        '\'{"f":{},"r":{},"n":1}\'',
    ),
    # Cloudflare's timingSafeEqual example: TextEncoder bytes into crypto.subtle's compare.
    (
        "js_text_encoder",
        "from js import TextEncoder\na = TextEncoder.new().encode('h\u00e9')\n"
        "return (bytes(a), a.byteLength, TextEncoder.new().encoding)",
        "(b'h\\xc3\\xa9', 3, 'utf-8')",
    ),
    (
        "js_timing_safe_equal",
        "from js import TextEncoder, crypto\ne = TextEncoder.new()\n"
        "eq = crypto.subtle.timingSafeEqual\n"
        "return (eq(e.encode('ab'), e.encode('ab')), eq(e.encode('ab'), e.encode('ac')))",
        "(True, False)",
    ),
    ("js_date_now", "import js\nreturn type(js.Date.now()).__name__", "'int'"),
    (
        "js_date_iso",
        "import js\nreturn js.Date.new(0).toISOString()",
        "'1970-01-01T00:00:00.000Z'",
    ),
    ("js_url", "import js\nreturn js.URL.new('https://a.test/p?q=1').searchParams.get('q')", "'1'"),
    # JS reads the object passed back to it: Object.fromEntries takes its pairs, last one wins.
    (
        "js_search_params_iterate",
        "import js\np = js.URL.new('https://a.test/?a=1&a=2&b=3').searchParams\n"
        "return (list(p), js.Object.fromEntries(p))",
        "(['a', 'a', 'b'], {'a': '2', 'b': '3'})",
    ),
    (
        "js_crypto_uuid",
        "import js\nreturn len(js.crypto.randomUUID())",
        "36",
    ),
    # Feature detection keeps working: a missing global is absent, not an import failure.
    (
        "js_hasattr_missing",
        "import js\nreturn (hasattr(js, 'HTMLRewriter'), getattr(js, 'Nope', 7),"
        " hasattr(js, 'URL'))",
        "(False, 7, True)",
    ),
    # new Response(body, {headers: h}) copies h, in the SDK's Response(body, headers=h) too:
    # changing one response's headers leaves h (and another response made from it) alone.
    (
        "response_headers_copied",
        "import js\nh = js.Headers.new()\nh.set('a', '1')\nr = js.Response.new('x', headers=h)\n"
        "s = Response('y', headers=h)\nr.headers.set('b', '2')\ns.headers['c'] = '3'\n"
        "return (h.has('b'), h.has('c'), s.headers.get('b'), r.headers.get('a'))",
        "(False, False, None, '1')",
    ),
    # --- env and ctx
    ("env_var", "return self.env.GREETING", "'hello'"),
    ("env_json_var", "return (self.env.CONF.depth, self.env.CONF['depth'])", "(2, 2)"),
    (
        "ctx_wait_until",
        "async def later():\n    pass\nself.ctx.waitUntil(later())\n"
        "self.ctx.wait_until(later())\nreturn 'ok'",
        "'ok'",
    ),
    # A value that is not awaitable is a resolved promise to workerd's waitUntil (Cloudflare's
    # debugging-logs example passes create_once_callable(coroutine)): accepted, nothing runs.
    (
        "ctx_wait_until_a_plain_value",
        "self.ctx.waitUntil(create_once_callable(lambda: 1))\nself.ctx.waitUntil(None)\n"
        "return 'ok'",
        "'ok'",
    ),
]

# (name, handler body, start of the message the platform-only API raises)
REFUSED: list[tuple[str, str, str]] = [
    ("js_eval", "import js\njs.eval('1')", "EvalError: Code generation from strings disallowed"),
    # Python Workers reach HTMLRewriter through `js`: not "JavaScript-only", just not in ember.
    (
        "js_html_rewriter",
        "from js import HTMLRewriter",
        "ImportError: HTMLRewriter is not provided by ember: rewrite the HTML as text in Python",
    ),
    ("js_websocket_pair", "from js import WebSocketPair", "ImportError: WebSocketPair is"),
    (
        "js_timing_safe_equal_lengths",
        "from js import crypto\ncrypto.subtle.timingSafeEqual(b'a', b'ab')",
        "TypeError: Input buffers must have the same byte length",
    ),
    ("js_unknown", "from js import NoSuchGlobal", "ImportError: NoSuchGlobal is not"),
    (
        "js_attribute",
        "import js\njs.HTMLRewriter.new()",
        "AttributeError: HTMLRewriter is not provided by ember",
    ),
    (
        "js_caches",
        "from js import caches",
        "ImportError: caches is not provided by ember: the Cache API; use a KV namespace",
    ),
    (
        "workers_import_js",
        "from workers import import_from_javascript as i\ni('x')",
        "ImportError: import_from_javascript",
    ),
    (
        "response_websocket",
        "Response(None, status=101, web_socket=object())",
        "TypeError: WebSocket responses",
    ),
]

# (name, handler body, (status, content-type, body) the client gets)
RESPONSES: list[tuple[str, str, tuple[int, str | None, bytes]]] = [
    ("r_text", "return Response('hi')", (200, "text/plain;charset=UTF-8", b"hi")),
    ("r_json", "return Response.json({'a': 1}, status=404)", (404, "application/json", b'{"a":1}')),
    (
        "r_headers_list",
        "return Response('x', headers=[('content-type', 'text/html')])",
        (200, "text/html", b"x"),
    ),
    (
        "r_none_302",
        "return Response(None, status=302, headers={'Location': '/n'})",
        (302, None, b""),
    ),
    (
        "r_js_new_init",
        "import js\nreturn js.Response.new('y', to_js({'status': 201, 'headers': "
        "{'content-type': 'a/b'}}, dict_converter=Object.fromEntries))",
        (201, "a/b", b"y"),
    ),
    (
        "r_to_js_buffer",
        "return Response(to_js(b'\\x00\\x01').buffer, headers={'content-type': 'image/png'})",
        (200, "image/png", b"\x00\x01"),
    ),
    (
        "r_bytes",
        "return Response(b'\\xff', headers={'content-type': 'x/y'})",
        (200, "x/y", b"\xff"),
    ),
    (
        "r_fetched_passthrough",
        "return await fetch(echo('array'))",
        (200, "application/json", b'[1,{"a":null}]'),
    ),
    (
        "r_replace_body",
        "r = await fetch(echo('array'))\nreturn r.replace_body('new')",
        (200, "application/json", b"new"),
    ),
]

PROBE_TEMPLATE = """
import json
import js
from js import Object
from pyodide.ffi import create_once_callable, create_proxy, to_js
from workers import Headers, Request, Response, WorkerEntrypoint, fetch

ECHO_BASE = {base!r}
HDR = {{"x-test-deployment": {echo!r}}}


def echo(path):
    return Request.new(ECHO_BASE + "/" + path, headers=HDR)

{probes}

class Default(WorkerEntrypoint):
    async def fetch(self, request):
        name = request.url.split("/")[-1]
        try:
            value = await globals()["p_" + name](self, request)
        except Exception as error:
            return Response(f"{{type(error).__name__}}: {{error}}", status=299)
        if isinstance(value, Response | js.Response):  # the SDK's, or a JS one
            return value
        return Response(repr(value))
"""


@pytest.fixture(scope="module")
def probes(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("conform")
    echo_id = harness.deploy(write_project(root / "echo", ECHO))
    rows = [(n, b) for n, b, _ in VALUES + REFUSED + RESPONSES]
    probes = "\n".join(
        f"async def p_{name}(self, request):\n{textwrap.indent(body, '    ')}\n"
        for name, body in rows
    )
    source = PROBE_TEMPLATE.format(base=harness.url, echo=echo_id, probes=probes)
    config = "vars:\n  GREETING: hello\n  CONF: {depth: 2}\n"
    return harness.deploy(write_project(root / "probes", source, config))


def _call(harness: Harness, deployment_id: str, name: str):  # noqa: ANN202 - httpx.Response
    with harness.client(deployment_id) as client:
        return client.post(
            f"/{name}", content=b'[1, {"a": null}]', headers={"x-pb": "2", "x-pa": "1"}
        )


@pytest.mark.parametrize(("name", "body", "expected"), VALUES, ids=[r[0] for r in VALUES])
def test_value(harness: Harness, probes: str, name: str, body: str, expected: str) -> None:
    reply = _call(harness, probes, name)
    assert (reply.status_code, reply.text) == (200, expected)


@pytest.mark.parametrize(("name", "body", "expected"), REFUSED, ids=[r[0] for r in REFUSED])
def test_refused(harness: Harness, probes: str, name: str, body: str, expected: str) -> None:
    reply = _call(harness, probes, name)
    assert reply.status_code == 299 and reply.text.startswith(expected), reply.text


@pytest.mark.parametrize(("name", "body", "expected"), RESPONSES, ids=[r[0] for r in RESPONSES])
def test_response(
    harness: Harness, probes: str, name: str, body: str, expected: tuple[int, str | None, bytes]
) -> None:
    reply = _call(harness, probes, name)
    got = (reply.status_code, reply.headers.get("content-type"), reply.content)
    assert got == expected, reply.text


def test_probe_rows_have_unique_names(tmp_path: Path) -> None:
    names = [r[0] for r in VALUES + REFUSED + RESPONSES]
    assert len(names) == len(set(names))
