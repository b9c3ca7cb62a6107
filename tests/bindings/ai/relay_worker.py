"""The generic worker ``test_binding_live`` deploys: it runs whatever the test posts ({model,
inputs, options, mode}) through ``env.AI.run`` and returns the result (JSON), the stream (its
response body: handed back unread, or relayed chunk by chunk through the handler), the raw
response, or the error it caught (status 599)."""

WORKER = """
import json
from workers import Response, WorkerEntrypoint


async def relay(stream):
    async for chunk in stream:
        yield chunk


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        ask = await request.json()
        mode = ask.get("mode", "json")
        try:
            result = await self.env.AI.run(ask["model"], ask["inputs"], ask.get("options"))
        except Exception as error:
            return Response.json({
                "type": type(error).__name__, "message": str(error),
                "code": getattr(error, "code", None), "status": getattr(error, "status", None),
            }, status=599)
        if mode == "stream":
            return Response(result, headers={"content-type": "text/event-stream"})
        if mode == "relay":
            return Response(relay(result), headers={"content-type": "text/event-stream"})
        if mode == "raw":
            return result
        checks = {
            "attr_equals_item": result.choices[0].message == result["choices"][0]["message"],
            "last_request_id": self.env.AI.lastRequestId,
        } if "choices" in result else {}
        return Response.json({"result": result, "checks": checks})
"""
