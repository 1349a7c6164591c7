import sys

from gpuenv.cli import entry

sys.exit(entry())
