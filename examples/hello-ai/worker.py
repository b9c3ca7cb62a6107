"""hello-ai: ask a local model a question.

GET /                        answers "What is a Python generator?"
GET /?q=What+is+asyncio%3F   answers your question
GET /?q=...&stream=1         streams the answer as server-sent events, as the platform does

The model is @cf/zai-org/glm-4.7-flash, served on this machine by ember's embedded engine.
"""

from urllib.parse import parse_qs, urlsplit

from workers import Response, WorkerEntrypoint

MODEL = "@cf/zai-org/glm-4.7-flash"


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        query = parse_qs(urlsplit(request.url).query)
        question = query.get("q", ["What is a Python generator?"])[0]
        inputs = {
            "messages": [
                {"role": "system", "content": "You are a concise Python expert."},
                {"role": "user", "content": question},
            ],
            "max_completion_tokens": 256,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        if query.get("stream"):
            stream = await self.env.AI.run(MODEL, {**inputs, "stream": True})
            return Response(stream, headers={"content-type": "text/event-stream"})
        result = await self.env.AI.run(MODEL, inputs)
        answer = result.choices[0].message.content or ""
        return Response(answer.strip() + "\n")
