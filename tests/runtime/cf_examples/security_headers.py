from workers import Response, fetch

async def on_fetch(request):
    default_security_headers = {
        "Content-Security-Policy": "default-src 'self' example.com *.example.com",
        "Strict-Transport-Security" : "max-age=63072000; includeSubDomains; preload",
        "Permissions-Policy": "interest-cohort=()",
        "X-XSS-Protection": "0",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "strict-origin-when-cross-origin",
        "Cross-Origin-Embedder-Policy": 'require-corp; report-to="default";',
        "Cross-Origin-Opener-Policy": 'same-site; report-to="default";',
        "Cross-Origin-Resource-Policy": "same-site",
    }
    blocked_headers = ["Public-Key-Pins", "X-Powered-By" ,"X-AspNet-Version"]

    res = await fetch(request)
    new_headers = res.headers

    # This sets the headers for HTML responses
    if "text/html" in new_headers["Content-Type"]:
        return Response(res.body, status=res.status, statusText=res.statusText, headers=new_headers)

    for name in default_security_headers:
        new_headers[name] = default_security_headers[name]

    for name in blocked_headers:
        del new_headers["name"]

    tls = request.cf.tlsVersion

    if not tls in ("TLSv1.2", "TLSv1.3"):
        return Response("You need to use TLS version 1.2 or higher.", status=400)
    return Response(res.body, status=res.status, statusText=res.statusText, headers=new_headers)
