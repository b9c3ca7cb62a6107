from workers import Response
import json

def on_fetch(request):
    data = json.dumps({"hello": "world"})
    headers = {"content-type": "application/json"}
    return Response(data, headers=headers)
