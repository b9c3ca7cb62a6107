"""ai-chat: a chat page whose answers stream from env.AI.run.

GET  /          the page (page.html)
POST /api/chat  {"messages": [...]} -> the model's answer as server-sent events, in the
                platform's format (chat.completion.chunk events, then usage, then [DONE]);
                if env.AI.run refuses, {"error": {"code", "message", "retryable"}} with its
                HTTP status, which the page shows in place of the answer
"""

from pathlib import Path

from workers import Response, WorkerEntrypoint

MODEL = "@cf/zai-org/glm-4.7-flash"
PAGE = (Path(__file__).parent / "page.html").read_text(encoding="utf-8")
MAX_MESSAGES = 40


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        path = request.url.split("?", 1)[0].rstrip("/").rsplit("/", 2)
        if request.method == "POST" and path[-2:] == ["api", "chat"]:
            return await self.chat(request)
        if request.method == "GET":
            return Response(PAGE, headers={"content-type": "text/html;charset=UTF-8"})
        return Response("Not found\n", status=404)

    async def chat(self, request):
        body = await request.json()
        messages = [
            {"role": m["role"], "content": str(m["content"])}
            for m in body.get("messages", [])[-MAX_MESSAGES:]
            if m.get("role") in ("user", "assistant")
        ]
        if not messages:
            return Response.json({"error": "send at least one message"}, status=400)
        inputs = {
            "messages": [{"role": "system", "content": "You are a helpful assistant."}, *messages],
            "max_completion_tokens": int(body.get("max_tokens", 256)),
            "stream": True,
            "chat_template_kwargs": {"enable_thinking": bool(body.get("thinking", False))},
        }
        # x-session-affinity keeps one conversation on one replica (its prefix cache).
        options = {"extraHeaders": {"x-session-affinity": str(body.get("session", "anonymous"))}}
        try:
            stream = await self.env.AI.run(MODEL, inputs, options)
        except Exception as error:  # InferenceUpstreamError: "<code>: <description>"
            return ai_error(error)
        return Response(stream, headers={"content-type": "text/event-stream"})


# Worth trying again later: out of capacity, the daily allocation, a timeout.
RETRYABLE = {3040, 3036, 3007}


def ai_error(error):
    """The AI's refusal as JSON the page can show, with the platform's HTTP status."""
    code, _, description = str(error).partition(": ")
    code = getattr(error, "code", None) or (int(code) if code.isdigit() else None)
    if code is None:
        raise error  # not an AI error: a bug here, let the runtime report it
    status = getattr(error, "status", None) or 502
    retryable = code in RETRYABLE
    message = description or str(error)
    if retryable:
        message = f"The model is busy right now, please try again in a moment ({message})"
    headers = {}
    retry_after = getattr(error, "retry_after", None)
    if retry_after:
        headers["retry-after"] = str(max(1, round(retry_after)))
    body = {"error": {"code": code, "message": message, "retryable": retryable}}
    return Response.json(body, status=status, headers=headers)
