"""gpuenv: reproducible, verified GPU deep-learning environments.

Only ``__version__`` lives here: importing the package must stay free so that
``gpuenv run`` and ``gpuenv --help`` start fast.
"""

__version__ = "0.1.0"
