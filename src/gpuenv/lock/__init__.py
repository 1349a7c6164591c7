"""Locking: exact, hash-pinned artifacts per target (pip through uv, conda through rattler).

``inputs`` says what a target's lock depends on and why a lock is out of date;
``target`` locks one target; ``project`` holds the use cases (lock a project, make sure
a lock is fresh, the one relock policy, write the file). ``model`` holds the lock in
memory and the backend protocol; ``uv`` and ``rattler`` are the two backends;
``format`` reads and writes ``gpuenv.lock``.
"""
