from workers import Response, fetch

async def on_fetch(request):
    tls_version = request.cf.tlsVersion
    if tls_version not in ("TLSv1.2", "TLSv1.3"):
        return Response("Please use TLS version 1.2 or higher.", status=403)
    return fetch(request)
