"""``gpuenv kernel`` names what it writes and removes by Jupyter's kernel-name rule, and
never as a path: an empty --name or a "../x" is refused by name, a listing with no
kernel says where it looked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuenv import kernels
from gpuenv.cli import main
from gpuenv.errors import UsageError


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", "Upper"])
def test_a_name_that_is_no_kernel_name_is_refused_for_install_and_remove(
    tmp_path: Path, name: str
) -> None:
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    spec = tmp_path / "gpuenv.toml"
    with pytest.raises(UsageError, match="is not a kernel name"):
        kernels.install(spec, "proj", "cpu", name=name, environ=environ)
    with pytest.raises(UsageError, match="is not a kernel name"):
        kernels.remove(name, environ)
    assert not (tmp_path / "data").exists()  # an empty --name wrote no default kernel


def test_remove_never_reaches_a_gpuenv_kernelspec_outside_the_kernels_directory(
    tmp_path: Path,
) -> None:
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    elsewhere = kernels.install(
        tmp_path / "gpuenv.toml",
        "proj",
        "cpu",
        name=None,
        environ={"JUPYTER_DATA_DIR": str(tmp_path)},
    )
    (tmp_path / "data" / "kernels").mkdir(parents=True)
    with pytest.raises(UsageError):
        kernels.remove(f"../../kernels/{elsewhere.name}", environ)
    assert json.loads((elsewhere.directory / "kernel.json").read_text())["metadata"]["gpuenv"]


def test_an_empty_listing_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert main(["kernel", "list"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"no gpuenv kernels in {tmp_path / 'data' / 'kernels'}" in captured.err
    assert main(["kernel", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"kernels": []}


def test_removing_a_linked_kernel_removes_the_link_and_keeps_what_it_points_to(
    tmp_path: Path,
) -> None:
    """rmtree refused the link ("Cannot call rmtree on a symbolic link", exit 5)."""
    elsewhere = kernels.install(
        tmp_path / "gpuenv.toml",
        "proj",
        "cpu",
        name=None,
        environ={"JUPYTER_DATA_DIR": str(tmp_path)},
    )
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "data" / "kernels").mkdir(parents=True)
    link = tmp_path / "data" / "kernels" / "linked"
    link.symlink_to(elsewhere.directory)
    assert kernels.remove("linked", environ).name == "linked"
    assert not link.is_symlink() and not link.exists()
    assert (elsewhere.directory / "kernel.json").is_file()


def test_two_checkouts_of_one_project_each_keep_their_kernel(tmp_path: Path) -> None:
    """The second checkout's `kernel install` replaced the first's kernel, same name and
    same display name, without a word."""
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    first, second = tmp_path / "vit-pytorch", tmp_path / "vit-ro"
    one = kernels.install(first / "gpuenv.toml", "vit-pytorch", "cpu", name=None, environ=environ)
    two = kernels.install(second / "gpuenv.toml", "vit-pytorch", "cpu", name=None, environ=environ)
    again = kernels.install(first / "gpuenv.toml", "vit-pytorch", "cpu", name=None, environ=environ)
    assert one.name == again.name == "gpuenv-vit-pytorch-cpu"
    assert two.name.startswith("gpuenv-vit-pytorch-cpu-") and two.display_name.endswith(", vit-ro)")
    listed = {k.name: k.project for k in kernels.listing(environ)}
    assert listed == {one.name: str(first), two.name: str(second)}


def test_one_checkout_reached_through_dot_dot_is_one_kernel_and_names_fit(tmp_path: Path) -> None:
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "p" / "sub").mkdir(parents=True)
    long = "a-project-with-a-rather-long-name-that-goes-on-and-on-and-on"
    one = kernels.install(tmp_path / "p" / "gpuenv.toml", long, "cpu", name=None, environ=environ)
    via = tmp_path / "p" / "sub" / ".." / "gpuenv.toml"
    two = kernels.install(via, long, "cpu", name=None, environ=environ)
    assert one.name == two.name and len(one.name) <= 64
    other = kernels.install(tmp_path / "q" / "gpuenv.toml", long, "cpu", name=None, environ=environ)
    assert other.name != one.name and len(other.name) == 64


def test_a_name_asked_for_never_replaces_another_projects_kernel(tmp_path: Path) -> None:
    """`kernel install --name X` where X was project A's kernel printed "wrote" and A's
    kernel then started project B; the same project may rewrite its own."""
    environ = {"JUPYTER_DATA_DIR": str(tmp_path / "data")}
    first, second = tmp_path / "a", tmp_path / "b"
    mine = kernels.install(first / "gpuenv.toml", "a", "cpu", name=None, environ=environ)
    with pytest.raises(UsageError, match=f"kernel {mine.name} starts a \\(cpu\\) of "):
        kernels.install(second / "gpuenv.toml", "b", "cpu", name=mine.name, environ=environ)
    again = kernels.install(first / "gpuenv.toml", "a", "cpu", name=mine.name, environ=environ)
    assert again.name == mine.name
    assert {k.project for k in kernels.listing(environ)} == {str(first)}


def test_a_name_too_long_says_the_limit() -> None:
    with pytest.raises(UsageError, match="128 characters, 64 at most"):
        kernels.install(Path("gpuenv.toml"), "p", "cpu", name="k" * 128, environ={})
