"""``slurm``: a batch script that starts a command the same way on every node: through
``gpuenv run``, which activates the target's prefix on the shared store and refuses (exit
4) on a node with no passing verification record for this lock.

The script is pinned to the lock it was exported from: before anything runs it checks
that the project still points at that lock's prefix, so a job never runs in an
environment other than the one the script names.
"""

from __future__ import annotations

from shlex import quote

from gpuenv.errors import UsageError
from gpuenv.export._common import ExportContext, Exported, one_line, origin


def render(context: ExportContext) -> Exported:
    target = context.target
    if context.project_dir is None or context.prefix is None or context.store_root is None:
        raise UsageError("export slurm needs the project's directory and store")
    name = target.name
    pointer = context.project_dir / ".gpuenv" / name
    gpuenv = " ".join(quote(a) for a in context.gpuenv_argv)
    verify = f"gpuenv verify --target {name} --slurm -- SAME-SBATCH-OPTIONS"
    lines = [
        "#!/bin/bash",
        f"# {origin(context, 'slurm')}",
        "#",
        "# Submit with the command to run (every task runs it):",
        "#   sbatch [--partition P --gres gpu:N --nodes N ...] job.sh COMMAND [ARGS...]",
        "# Each task starts COMMAND through `gpuenv run`: the prefix activated, and refused",
        "# (exit 4) on a node without a passing verification of this lock. Verify the nodes",
        f"# first, from the login node: {verify}",
        f"#SBATCH --job-name={quote(one_line(f'{context.project}-{name}'))}",
        "#SBATCH --ntasks-per-node=1",
        "set -euo pipefail",
        f"export GPUENV_HOME={quote(str(context.store_root))}",
        f"project={quote(str(context.project_dir))}",
        f"expected={quote(str(context.prefix))}",
        'if [ "$#" -eq 0 ]; then',
        '    echo "usage: sbatch $0 COMMAND [ARGS...]" >&2',
        "    exit 2",
        "fi",
        f"installed=$(readlink {quote(str(pointer))} || true)",
        'if [ "$installed" != "$expected" ]; then',
        f'    echo "gpuenv: error: target {name} of $project is not the lock this script was '
        f'exported for (installed: ${{installed:-nothing}}); install it, or export again" >&2',
        "    exit 4",
        "fi",
        f'exec srun {gpuenv} -f "$project/gpuenv.toml" run --target {quote(name)} -- "$@"',
    ]
    return Exported("\n".join(lines) + "\n")
