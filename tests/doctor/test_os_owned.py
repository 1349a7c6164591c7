"""A Debian-style system Python: dist-packages, dpkg's file lists, and the PEP 668
EXTERNALLY-MANAGED marker. What the OS package manager owns gets fixes that fit: no
plain pip command (which the interpreter refuses)."""

from __future__ import annotations

from pathlib import Path

from gpuenv.doctor import Severity
from tests.doctor.conftest import ElfFactory, FakeEnv, Run, codes, only

# Debian's own marker text, in our words: what it says is what matters.
MARKER = """[externally-managed]
Error=To install Python packages system-wide, try apt install
 python3-xyz, where xyz is the package you are trying to install.
"""


def debian_usr(tmp_path: Path, elf: ElfFactory, host_root: Path) -> FakeEnv:
    """A /usr as Debian leaves it: python3.11's stdlib with the marker, and
    lib/python3/dist-packages holding PyYAML as python3-yaml ships it: both an
    egg-info (from the build) and a dist-info, one dpkg package."""
    usr = FakeEnv(tmp_path / "usr", elf, python_dir="python3")
    stdlib = usr.prefix / "lib" / "python3.11"
    stdlib.mkdir(parents=True)
    (stdlib / "EXTERNALLY-MANAGED").write_text(MARKER)
    dist_packages = usr.prefix / "lib" / "python3" / "dist-packages"
    dist_packages.mkdir(parents=True)
    egg = dist_packages / "PyYAML-6.0.1.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0.1\n\n")
    dist_info = usr.dist("PyYAML", "6.0.1", installer="debian", site=dist_packages)
    (dist_packages / "yaml").mkdir()
    (dist_packages / "yaml" / "__init__.py").write_text("")
    info = host_root / "var" / "lib" / "dpkg" / "info"
    info.mkdir(parents=True)
    listed = [egg, egg / "PKG-INFO", dist_info, dist_info / "METADATA", dist_packages / "yaml"]
    (info / "python3-yaml:amd64.list").write_text("".join(f"{p}\n" for p in listed))
    return usr


def test_one_dpkg_package_with_an_egg_info_and_a_dist_info_is_not_a_duplicate(
    tmp_path: Path, elf: ElfFactory, host_root: Path, run: Run
) -> None:
    usr = debian_usr(tmp_path, elf, host_root)
    report = run(usr)
    assert "duplicate-dist-info" not in codes(report), report.findings
    assert not report.has_errors


def test_a_pip_copy_beside_the_os_package_is_an_error_fixed_without_plain_pip(
    tmp_path: Path, elf: ElfFactory, host_root: Path, run: Run
) -> None:
    usr = debian_usr(tmp_path, elf, host_root)
    stray = usr.dist(
        "PyYAML", "6.0.2", installer="pip", site=usr.prefix / "lib" / "python3" / "dist-packages"
    )
    finding = only(run(usr), "duplicate-dist-info")
    assert finding.severity is Severity.ERROR
    assert f"delete the copy no OS package owns: {stray}" in finding.fix
    assert "apt-get install --reinstall python3-yaml" in finding.fix
    assert "EXTERNALLY-MANAGED marks this interpreter as the OS's" in finding.fix
    assert "pip uninstall" not in finding.fix
    owned = [c for c in finding.evidence["copies"] if c.get("os_package")]
    assert {c["os_package"] for c in owned} == {"python3-yaml"}


def test_without_the_os_two_pip_copies_keep_the_pip_fix(
    tmp_path: Path, elf: ElfFactory, run: Run
) -> None:
    env = FakeEnv(tmp_path / "venv", elf)
    env.site.mkdir(parents=True)
    (env.prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    env.dist("numpy", "1.26.4")
    env.dist("numpy", "2.0.0", site=env.site)  # same folder: another version's dist-info
    finding = only(run(env), "duplicate-dist-info")
    assert "pip uninstall numpy" in finding.fix


def test_hostile_dpkg_lists_never_hang_or_break_the_doctor(
    tmp_path: Path, elf: ElfFactory, host_root: Path, run: Run
) -> None:
    import os

    usr = debian_usr(tmp_path, elf, host_root)
    info = host_root / "var" / "lib" / "dpkg" / "info"
    os.mkfifo(info / "a-fifo.list")
    (info / "zero.list").symlink_to("/dev/zero")
    (info / "binary.list").write_bytes(b"\xff\xfe\x00/not/utf8\n" * 1000)
    report = run(usr)
    assert "duplicate-dist-info" not in codes(report), "python3-yaml's list still read"
