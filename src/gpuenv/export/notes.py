"""``notes``: a Markdown record of an environment for a paper's appendix or a lab
notebook: the hardware it was locked for, the stack, every package with its hash, the
lock's hash, and the latest verification on each machine (GPUs, TFLOP/s, when).

The text depends only on the lock and the records: no "generated at" time, so the same
inputs give the same bytes.
"""

from __future__ import annotations

from gpuenv import __version__
from gpuenv.export._common import ExportContext, Exported, clean_url, locked_hash
from gpuenv.lock.model import LockedTarget
from gpuenv.verify.record import VerificationRecord
from gpuenv.verify.summary import summarize


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def _table(headers: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _hardware(target: LockedTarget) -> list[str]:
    hw = target.hardware
    gpu = "none (a CPU build)" if hw.cpu else (hw.gpu or "any")
    if hw.compute_capabilities:
        gpu += f" (compute capability {', '.join(hw.compute_capabilities)})"
    driver = hw.driver or "-"
    if hw.driver_cuda:
        driver += f" (newest CUDA it runs: {hw.driver_cuda})"
    virtual: list[list[object]] = [[k, v] for k, v in sorted(target.virtual_packages.items())]
    rows: list[list[object]] = [
        ["GPU", gpu],
        ["NVIDIA driver", driver],
        ["platform", target.platform],
        *virtual,
        ["facts", hw.source],
    ]
    return ["## Hardware (as locked)", "", *_table(["", ""], rows)]


def _stack(target: LockedTarget) -> list[str]:
    s = target.stack
    rows: list[list[object]] = [
        ["Python", s.python],
        ["CUDA", f"{s.cuda} ({s.cu_tag})" if s.cuda else f"none ({s.cu_tag})"],
        ["torch", s.torch],
        ["torchvision", s.torchvision],
        ["torchaudio", s.torchaudio],
        ["cuDNN", s.cudnn],
        ["NCCL", s.nccl],
        ["arch list", " ".join(s.arch_list)],
        ["index (torch from)", clean_url(s.index)],
    ]
    return ["## Stack", "", *_table(["", ""], rows)]


def _machine(record: VerificationRecord) -> str:
    host = record.extra.get("slurm_node") or record.extra.get("host")
    return str(host) if host else record.fingerprint_hash[:12]


def _verification(
    target: LockedTarget, records: tuple[VerificationRecord, ...], lock_hash: str
) -> list[str]:
    head = ["## Verification (the latest on each machine)", ""]
    mine = [r for r in records if r.lock_hash == lock_hash]
    if not mine:
        return [*head, f"Not verified yet: `gpuenv verify --target {target.name}`."]
    rows: list[list[object]] = []
    for record in mine:
        summary = summarize(record.probe)
        gpus = ", ".join(summary.gpus) or "none"
        rate = f"{summary.tflops:g} ({summary.dtype})" if summary.tflops is not None else None
        verdict = "pass" if record.usable else f"FAIL: {summary.failed}"
        driver = record.fingerprint.get("driver")
        rows.append([_machine(record), gpus, driver, verdict, rate, record.finished_at])
    headers = ["machine", "GPUs", "driver", "result", "TFLOP/s", "when (UTC)"]
    return [*head, *_table(headers, rows)]


def _packages(target: LockedTarget) -> list[str]:
    lines = []
    if target.conda:
        rows: list[list[object]] = [
            [c.name, c.version, c.build, clean_url(c.channel), f"`{c.sha256}`"]
            for c in sorted(target.conda, key=lambda c: c.name)
        ]
        lines += [f"## conda packages ({len(rows)})", ""]
        lines += [*_table(["name", "version", "build", "channel", "sha256"], rows), ""]
    rows = [
        [p.name, p.version, p.filename, f"`{p.sha256}`"]
        for p in sorted(target.pip, key=lambda p: p.name)
    ]
    lines += [f"## pip packages ({len(rows)})", ""]
    lines += _table(["name", "version", "file", "sha256"], rows)
    return lines


def render(context: ExportContext) -> Exported:
    target = context.target
    lines = [
        f"# {context.project}: target {target.name}",
        "",
        f"Locked by gpuenv {__version__}. Lock hash (everything installed): "
        f"`{locked_hash(context)}`; spec hash: `{context.lock.spec_hash}`.",
        "",
        *_hardware(target),
        "",
        *_stack(target),
        "",
        *_verification(target, context.records, locked_hash(context)),
        "",
        *_packages(target),
    ]
    return Exported("\n".join(lines) + "\n")
