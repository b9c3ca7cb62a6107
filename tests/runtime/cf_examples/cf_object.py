import json
from workers import Response
from js import JSON

def on_fetch(request):
    error = json.dumps({ "error": "The `cf` object is not available inside the preview." })
    data = request.cf if request.cf is not None else error
    headers = {"content-type":"application/json"}
    return Response(JSON.stringify(data, None, 2), headers=headers)
