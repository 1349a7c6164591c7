"""Running gpuenv across a cluster's nodes through the scheduler it already has.

``slurm``: ``gpuenv verify --slurm`` starts one task per node with ``srun``; each task
verifies the target's prefix on the shared store on its own node (writing that node's
record, as any ``gpuenv verify`` does) and reports one line; the login node gathers the
lines into one row per node.
"""
