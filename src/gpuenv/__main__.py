import gpuenv

gpuenv._guard_start_up(force=True)  # `python -m gpuenv`: guard the imports below as well

import sys  # noqa: E402

from gpuenv.cli import entry  # noqa: E402

sys.exit(entry())
