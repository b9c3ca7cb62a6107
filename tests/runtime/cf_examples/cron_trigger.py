from workers import handler

@handler
async def on_scheduled(controller, env, ctx):
  print("cron processed")
