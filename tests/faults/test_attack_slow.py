"""The issue 24 attack, as slow tests (``-m slow``): export injection over many hostile
project paths, activation markers in every shell, credential forms, archives with
extended headers. Each prints its counts (tries / held) with ``-s``; every try must hold.
The lock-value fuzz is ``test_lock_value_fuzz.py``."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from gpuenv import export
from gpuenv._network import Index
from gpuenv._redact import redact, redact_url
from gpuenv.errors import ArchiveError
from gpuenv.pack import unpack
from gpuenv.store import Store
from tests.export.test_hostile import _context, _no_secret
from tests.faults.test_stale_marker import _env, _installed
from tests.pack.test_archive import _members, _rewrite

pytestmark = pytest.mark.slow

PIECES = (
    ";touch PWNED;#",
    "$(touch PWNED)",
    "`touch PWNED`",
    "'",
    '"',
    "\\",
    "$HOME",
    "${IFS}",
    "B_TOKEN=z",
    "A_PASSWORD=p w",
    "&&",
    "|",
    "*",
    "\n",
    "\t",
    "-rf",
    "--",
    "é",
)


def _report(name: str, tries: int, held: int) -> None:
    print(json.dumps({"attack": name, "tries": tries, "held": held}))


def test_export_injection_over_hostile_paths(tmp_path: Path) -> None:
    rng = random.Random(24)
    combos = [a + b for a, b in itertools.permutations(PIECES, 2)]
    rng.shuffle(combos)
    tries = held = 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "srun.json"
    (bin_dir / "srun").write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
    )
    (bin_dir / "srun").chmod(0o755)
    for i, piece in enumerate(combos[:60]):
        project = tmp_path / f"p{i}" / piece / "x"
        store = tmp_path / f"s{i}" / piece
        project.mkdir(parents=True)
        store.mkdir(parents=True)
        context = _context(project, store)
        texts = {fmt: export.export(fmt, context).text for fmt in export.FORMATS}
        for text in texts.values():
            tries += 1
            _no_secret(text)
            held += 1
        script = tmp_path / "job.sh"
        script.write_text(texts["slurm"])
        (project / ".gpuenv").mkdir()
        (project / ".gpuenv" / "cpu").symlink_to(context.prefix)  # type: ignore[arg-type]
        run = subprocess.run(
            ["bash", script, "echo", piece],
            cwd=tmp_path,
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
            capture_output=True,
            check=False,
        )
        tries += 1
        argv = json.loads(record.read_text()) if run.returncode == 0 else None
        if argv and argv[4] == f"{project}/gpuenv.toml" and argv[-1] == piece:
            held += 1
        record.unlink(missing_ok=True)
    tries += 1
    held += not list(tmp_path.rglob("PWNED"))
    _report("export injection", tries, held)
    assert held == tries


@pytest.mark.parametrize("shell", ["bash", "sh", "dash", "zsh", "fish"])
def test_activation_markers_that_lie(shell: str, tmp_path: Path) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed")
    installed = _installed(tmp_path)
    prefix_bin = f"{installed.prefix}/bin"
    states = {
        "path reset": "/usr/bin:/bin",
        "prefix later": f"/usr/bin:{prefix_bin}:/bin",
        "prefix as a prefix of another entry": f"{prefix_bin}x:/usr/bin:/bin",
        "empty path entries": "::/usr/bin:/bin",
    }
    flag = "sh" if shell == "dash" else shell
    line = f"{sys.executable} -m gpuenv activate --unverified --shell {flag}"
    tries = held = 0
    for name, path in states.items():
        env = _env(installed, tmp_path, path)
        code = (
            f"eval ({line} | string collect); python"
            if shell == "fish"
            else f'eval "$({line})"; python'
        )
        run = [sys.executable, "-m", "gpuenv", "run", "--unverified", "--", "python"]
        for argv in ([program, "-c", code], run):  # eval "$(gpuenv activate)", gpuenv run
            result = subprocess.run(
                argv, cwd=installed.project, env=env, capture_output=True, text=True, check=False
            )
            tries += 1
            held += result.stdout.split()[:1] == ["the-prefix-python"]
            assert result.stdout.split()[:1] == ["the-prefix-python"], (name, result.stderr)
    _report(f"activation markers ({shell})", tries, held)


def test_every_userinfo_form_is_removed_whole() -> None:
    rng = random.Random(6)
    alphabet = "abcXYZ019@:%/?#!$&'()*+,;=-._~ "
    tries = held = 0
    for _ in range(2000):
        user = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12)))
        secret = "LEAK" + "".join(rng.choice(alphabet) for _ in range(rng.randrange(6, 20)))
        for raw in (True, False):
            u = user.replace("/", "").replace("?", "").replace("#", "").replace(" ", "")
            s = secret.replace("/", "").replace("?", "").replace("#", "").replace(" ", "")
            if not raw:
                u, s = quote(u, safe=""), quote(s, safe="")
            url = f"https://{u}:{s}@idx.example/simple/"
            tries += 1
            shown = redact_url(url)
            # In text a quote ends a URL (as in 'https://...'): a raw quote in a password is
            # for the value rule alone.
            said = redact(f"error: {url} failed") if not set("'\"<>`") & set(url) else ""
            index = Index.parse("gpuenv-default", url)
            ok = (
                "LEAK" not in shown
                and "LEAK" not in said
                and shown == "https://idx.example/simple/"
                and urlsplit(index.url).hostname == "idx.example"
                and "LEAK" not in index.url
            )
            held += ok
            assert ok, url
    _report("userinfo forms", tries, held)


def test_archives_with_extended_headers(tmp_path: Path) -> None:
    from gpuenv.pack import PackRequest, prepare, write
    from tests.pack.test_archive import make_lock
    from tests.pack.test_prescan import SPARSE, _with_pax

    lock = make_lock(tmp_path / "origin")
    spec = tmp_path / "gpuenv.toml"
    spec.write_text('[project]\nname = "attack"\n')
    archive = tmp_path / "good.tar"
    write(prepare(PackRequest(lock, ("cpu",), "attack", spec, Store(tmp_path / "s"))), archive)
    variants = [SPARSE, {"comment": "x" * 5000}, {"hdrcharset": "BINARY"}, {"uid": "0"}]
    variants += [{"path": "gpuenv-pack/" + "a" * n} for n in (5000, 100_000)]
    variants += [{"GNU.sparse.map": "0," + "9" * 50}, {"linkpath": "../../etc/passwd"}]
    tries = held = 0
    for i, headers in enumerate(variants):
        hostile = _rewrite(tmp_path / f"h{i}.tar", _with_pax(_members(archive), headers))
        tries += 1
        try:
            unpack(hostile, Store(tmp_path / f"air{i}"))
        except ArchiveError:
            held += 1
    with tarfile.open(archive) as tar:  # gpuenv's own archive still unpacks
        assert tar.getmembers()
    unpack(archive, Store(tmp_path / "ok"))
    _report("archives", tries, held)
    assert held == tries
