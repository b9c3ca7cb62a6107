"""What the quantization flags may name, torch-free: ``ember models serve`` validates its flags
(and ``--help`` lists them) before torch loads, and the INT4 code checks against the same tuple.
"""

from __future__ import annotations

# Group sizes of the INT4 layout: PyTorch's CPU int4 kernel takes 32, 64 and 128, and the
# checkpoints ember loads use 32 (Kimi's native INT4) or 128 (GLM-5.3-W4A8's experts).
INT4_GROUP_SIZES = (32, 64, 128)
DEFAULT_INT4_GROUP_SIZE = 32
# Which linear layers ``--quantization`` covers unless ``--quantization-targets`` says: fp8 is
# every linear layer, as in SGLang and vLLM (SGLang's choices list it as "MOE + linear online
# quantization"); int4 is the routed experts only, as Kimi's native INT4 and the W4A8/W4AFP8
# checkpoints ship it (reference/serving.md, section 4.3).
DEFAULT_TARGETS = {"fp8": "all", "int4": "experts"}
