from workers import Response

async def on_fetch(request):
    print(dict(request.headers))
    return Response('Hello world')
