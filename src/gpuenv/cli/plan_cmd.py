"""`gpuenv plan`: the chosen stack per target, with reasons."""
