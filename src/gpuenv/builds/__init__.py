"""Compiled extensions: packages gpuenv builds from source for the target's GPUs, once.

- ``model``: a build as the lock records it, and its identity (the hash of every input);
- ``knowledge``: how the well-known packages are built, which host compilers each nvcc
  accepts, and what the known causes of a failed build look like (``packages.toml``,
  ``host_compilers.toml`` and ``diagnoses.toml`` in ``knowledge/data``);
- ``compiler`` / ``jobs``: the host compiler (checked before a build starts) and
  ``MAX_JOBS`` (from cores and free memory);
- ``cache``: built wheels in the store, content-addressed by identity;
- ``fetch``: sources, hash-checked; ``runner``: running one build (``progress`` and
  ``diagnose`` turn its output into progress reports and, on failure, a diagnosis);
- ``wheelfile``: a built wheel's extension modules, and gpuenv's record added to it;
- ``elfscan``: the GPU code (fat binaries) and torch symbols of a built shared object.
"""
