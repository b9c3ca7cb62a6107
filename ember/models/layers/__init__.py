"""Building blocks shared by the three architectures: norms, rotary, MLPs, MoE, attention."""
