"""Model side: catalog, architectures (Kimi = DeepseekV3, GLM-4.x = Glm4Moe, GLM-5.x = GlmMoeDsa),
checkpoint loading, quantization, the serving engine, the model server and the pool.

The only package that imports torch.
"""
