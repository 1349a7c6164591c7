"""Other frameworks: a TensorFlow or JAX project is said to be one, never given a torch.

gpuenv plans PyTorch environments. When the files ask for another framework
(``knowledge/data/companions.toml`` entries with ``moves = "unmanaged"``: TensorFlow, JAX,
Paddle, MXNet; from a requirement or a base image such as ``tensorflow/tensorflow``) and
nothing asks for torch (no torch, torchvision or torchaudio, no package compiled against
torch, no ``torch.utils.cpp_extension``), the import writes nothing and says why, with
what runs that framework on the target instead (exit 3), rather than inventing a torch
the repository never used.
"""

from __future__ import annotations

from packaging.version import Version

from gpuenv.errors import NoCompatiblePlan
from gpuenv.importers import companions as moves
from gpuenv.importers.merge import Merged, Resolved
from gpuenv.importers.model import CUDA_EXTENSION
from gpuenv.knowledge import KnowledgeBase
from gpuenv.knowledge.foreign import Companion, ForeignKnowledge
from gpuenv.names import TRIO

# What runs each framework on a current GPU, by companions.toml name (sources there).
INSTEAD = {
    "tensorflow": (
        "TensorFlow 2 from PyPI (2.14 and later bring their CUDA: pip install "
        "'tensorflow[and-cuda]'), or NVIDIA's NGC TensorFlow containers "
        "(nvcr.io/nvidia/tensorflow:<YY.MM>-tf2-py3; -tf1-py3 tags keep TF 1.15 on GPUs "
        "TensorFlow's own 1.x builds predate)"
    ),
    "tensorflow-gpu": "the same as for tensorflow (tensorflow-gpu ended with 2.12)",
    "jax": "JAX's CUDA wheels: pip install 'jax[cuda12]'",
    "jaxlib": "JAX's CUDA wheels: pip install 'jax[cuda12]'",
}


def asks_torch(merged: Merged, fk: ForeignKnowledge) -> bool:
    """Whether anything in the files needs torch."""
    if any(name in merged.packages for name in TRIO) or merged.facts.get(CUDA_EXTENSION):
        return True
    for name in merged.packages:
        companion = fk.companion(moves.companion_name(name))
        if companion is not None and companion.compiled_against_torch:
            return True
    return False


def _found(merged: Merged, fk: ForeignKnowledge) -> list[tuple[Companion, Resolved]]:
    out = []
    for name, resolved in merged.packages.items():
        companion = fk.companion(moves.companion_name(name))
        if companion is not None and companion.moves == "unmanaged":
            out.append((companion, resolved))
    return out


def _why(companion: Companion, resolved: Resolved, kb: KnowledgeBase, gpu: str | None) -> str:
    cite = resolved.ask.origin.cite()
    exact = resolved.exact
    model = kb.find_gpu(gpu) if gpu else None
    release = companion.release_of(Version(exact.public)) if exact is not None else None
    limit = release.gpu_max if release is not None else None
    if limit is not None and model is not None and model.cc > limit:
        return (
            f"{cite}: {companion.name} {exact} was built for GPUs up to compute "
            f"capability {limit}: no kernels for {model.cc.sm}"
        )
    return f"{cite}: {companion.note}" if companion.note else cite


def refuse_invented_torch(
    merged: Merged, fk: ForeignKnowledge, kb: KnowledgeBase, target: str, gpu: str | None
) -> None:
    """``NoCompatiblePlan`` for another framework's project that never asks for torch."""
    found = _found(merged, fk)
    if not found or asks_torch(merged, fk):
        return
    names = ", ".join(dict.fromkeys(c.name for c, _ in found))
    lines = [
        f"a {names} project: no file asks for torch, and gpuenv plans PyTorch "
        "environments, so it writes none rather than invent one",
        *(f"- {_why(c, r, kb, gpu)}" for c, r in found),
    ]
    instead = [INSTEAD[c.name] for c, _ in found if c.name in INSTEAD]
    hint = "; ".join(dict.fromkeys(instead)) if instead else None
    raise NoCompatiblePlan("\n".join(lines), target=target, hint=hint)
