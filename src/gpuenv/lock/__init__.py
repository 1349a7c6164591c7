"""Locking: exact, hash-pinned artifacts per target (pip through uv, conda through rattler).

``model`` holds the lock in memory and the backend protocol; ``uv`` and ``rattler``
are the two backends; ``format`` reads and writes ``gpuenv.lock``.
"""
