"""No "${" reaches a requirements file uv or pip reads (issue 24, finding 2): both expand
``${NAME}`` there from the installing machine's environment, so an index linking to
``...whl?x=${SECRET}`` would receive that machine's secret."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpuenv import export
from gpuenv.install import requirements_text
from gpuenv.lock.format import parse_lock_text, render_lock
from gpuenv.lock.inputs import recorded_url
from gpuenv.lock.model import Lock, PipPackage
from tests.locked import cpu_target

WHEEL = "https://t.invalid/cpu/torch-2.4.1+cpu-cp311-cp311-linux_x86_64.whl"


def test_the_locker_records_a_linked_variable_as_its_characters() -> None:
    recorded = recorded_url("https://u:pw@h.invalid/x.whl?x=${SECRET}&token=t")
    assert recorded == "https://h.invalid/x.whl?x=%24{SECRET}"
    target = cpu_target()
    torch = replace(target.pip[0], url=recorded_url(WHEEL + "?x=${SECRET}"))
    lock = Lock("sha256:" + "1" * 64, {"cpu": replace(target, pip=(torch,))})
    reading = parse_lock_text(render_lock(lock))  # what gpuenv writes, it reads
    assert not reading.damaged and "${" not in render_lock(lock)


def test_the_reader_refuses_a_url_with_a_variable_even_with_its_hash_recomputed() -> None:
    target = cpu_target()
    torch = replace(target.pip[0], url=WHEEL + "?x=${SECRET}")
    lock = Lock("sha256:" + "1" * 64, {"cpu": replace(target, pip=(torch,))})
    reading = parse_lock_text(render_lock(lock))  # render_lock recomputes the hash
    assert "cpu" in reading.damaged
    assert any("uv and pip expand" in p for p in reading.damaged["cpu"])


def test_install_and_every_export_write_no_variable_for_a_mirror_or_an_edited_value(
    tmp_path: Path,
) -> None:
    from gpuenv._artifacts import ArtifactSources

    target = cpu_target()

    class Mirror(ArtifactSources):
        def url_for(self, url: str) -> str:
            return "https://mirror.invalid/${HOME}/" + url.rsplit("/", 1)[1]

    text = requirements_text(target, Mirror())
    assert "${" not in text and "https://mirror.invalid/%24{HOME}/torch-" in text
    index = replace(target.stack, index="https://torch.invalid/${X}/cpu")
    hostile = replace(
        target,
        stack=index,
        pip=(
            PipPackage(
                **{**target.pip[0].__dict__, "index": "https://i.invalid/${TOKEN_X}/simple"}
            ),
        ),
    )
    context = export.ExportContext(
        Lock("s", {"cpu": hostile}),
        hostile,
        "demo",
        prefix=tmp_path,
        project_dir=tmp_path,
        store_root=tmp_path,
    )
    for fmt in ("requirements", "pylock", "dockerfile", "environment-yml"):
        assert "${" not in export.export(fmt, context).text, fmt
