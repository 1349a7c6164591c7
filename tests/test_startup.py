"""Start-up stays light: --version, --help and parser construction import nothing heavy."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pydantic", "tomlkit", "rattler", "httpx", "rich", "pynvml", "conda_lock", "packaging")


def _imported_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_version_and_parser_import_nothing_heavy() -> None:
    modules = _imported_after(
        "from gpuenv.cli import build_parser, main\n"
        "build_parser()\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass"
    )
    loaded = {m.split(".")[0] for m in modules}
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_help_runs_and_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuenv", "--help"], capture_output=True, text=True, check=True
    )
    assert "plan" in out.stdout and "init" in out.stdout


def test_the_run_path_imports_nothing_heavy_with_the_gate_and_the_lock_check(
    tmp_path: object,
) -> None:
    """`gpuenv run` (marker, lock check, roots, records, delta) up to the exec: no
    pathlib, tempfile, dataclasses or typing, and nothing that parses the lock."""
    import os
    from pathlib import Path

    root = Path(str(tmp_path))
    project = _bench_project(root)
    probe = (
        "import os, sys\n"
        "def done(*a):\n"
        "    print(' '.join(sorted(sys.modules)))\n"
        "    os._exit(0)\n"
        "os.execvpe = done\n"
        "from gpuenv.cli import main\n"
        "main(['run', '--', 'true'])\n"
    )
    env = {**os.environ, "GPUENV_HOME": str(root / "store")}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=project,
        env=env,
    )
    loaded = set(out.stdout.split())
    assert {"gpuenv.verify.gate", "gpuenv._fsread"} <= loaded, out.stderr  # exec reached
    heavy = {"pathlib", "tempfile", "dataclasses", "typing", "tomllib", "gpuenv.lock.format"}
    heavy |= {"gpuenv._fs"}  # the write side: tempfile and pathlib
    heavy |= {"hashlib"}  # OpenSSL and every algorithm's constructor: gpuenv._sha256 instead
    assert not loaded & (heavy | set(HEAVY)), loaded & (heavy | set(HEAVY))


def _bench_project(root: object) -> object:
    """The project bench/run.py measures: a real lock, an installed and verified prefix."""
    import importlib.util
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench"
    sys.path.insert(0, str(bench))
    try:
        spec = importlib.util.spec_from_file_location("bench_run", bench / "run.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.make_project(Path(str(root)))
    finally:
        sys.path.remove(str(bench))


def test_lock_check_loads_no_knowledge_base_and_starts_no_tool(tmp_path: object) -> None:
    """`lock --check` of a fresh lock whose spec was read before: no knowledge base
    (its data files), no pydantic, nothing that builds or starts processes; checked
    fresh before, not even the spec's or the lock's TOML."""
    import os
    from pathlib import Path

    root = Path(str(tmp_path))
    spec = root / "gpuenv.toml"
    spec.write_text(
        '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\n'
        '[targets.cpu]\ngpu = "none"\n'
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache"), "GPUENV_HOME": str(root / "s")}
    _lock(spec, env)
    probe = (
        "import sys\n"
        "from gpuenv.cli import main\n"
        "code = main(['lock', '--check'])\n"
        "print(code, ' '.join(sorted(sys.modules)))\n"
    )
    run = [sys.executable, "-c", probe]
    subprocess.run(run, capture_output=True, text=True, check=True, cwd=root, env=env)
    out = subprocess.run(run, capture_output=True, text=True, check=True, cwd=root, env=env)
    code, *loaded = out.stdout.split()
    assert code == "0", out.stderr
    heavy = {"gpuenv.knowledge.model", "gpuenv.builds.compiler", "gpuenv._proc", "pydantic"}
    # Found fresh before, the same bytes are not read as TOML again (lock._fresh).
    heavy |= {"gpuenv.spec", "gpuenv.lock.format", "gpuenv.lock.model"}
    heavy |= {"gpuenv.lock.inputs", "gpuenv.lock.target", "gpuenv.lock.project"}
    # Its digests read bytes: no TOML parser, no build-knowledge model, no dataclasses,
    # no importlib.resources (about 20 ms of imports on a 70 ms budget)
    heavy |= {"tomllib", "tomli", "gpuenv.builds.knowledge", "dataclasses", "importlib.resources"}
    # hashing through gpuenv._sha256 (no OpenSSL), argparse's width without shutil (bz2, lzma)
    heavy |= {"hashlib", "shutil"}
    assert not heavy & set(loaded), heavy & set(loaded)


def _lock(spec: object, env: dict[str, str]) -> None:
    """Lock ``spec`` with `gpuenv lock` and stand-in resolvers."""
    code = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.lock.fakes import FakeConda, FakePip\n"
        "from gpuenv.cli import main\n"
        "from gpuenv.lock import backends\n"
        "backends.resolvers = lambda: (FakePip(), FakeConda())\n"
        "raise SystemExit(main(['-f', sys.argv[2], 'lock']))\n"
    )
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    subprocess.run(
        [sys.executable, "-c", code, repo, str(spec)], check=True, env=env, capture_output=True
    )


def test_reading_wheel_metadata_from_the_cache_loads_no_http_client() -> None:
    """A relock whose torch metadata is in gpuenv's cache fetches nothing: urllib.request
    (with http.client, ssl and email, ~10 ms) loads only when something is fetched."""
    modules = _imported_after(
        "import gpuenv.lock.wheelmeta, gpuenv.lock.wheelcheck, gpuenv.lock.project"
    )
    assert not {"urllib.request", "http.client", "ssl"} & modules


def test_the_install_path_loads_no_activation_writer() -> None:
    """`gpuenv install` of a target whose prefix is current writes no activation scripts:
    their writers (gpuenv.activation, gpuenv.shells: ~8 ms of imports) load only when
    a prefix is (re)built."""
    modules = _imported_after("import gpuenv.install, gpuenv.cli.install_cmd")
    assert not {"gpuenv.activation", "gpuenv.shells"} & modules
    # and they are still there when a prefix is written
    import gpuenv.install

    assert callable(gpuenv.install.write_activation)


def test_reading_a_lock_and_its_groups_loads_no_build_model() -> None:
    """`install` of a lock without builds reads the lock and its groups: the build model
    (hashlib's OpenSSL, four dataclasses), the build needs with packaging's requirement
    parser, uuid and difflib load only where a build, a build need, a fresh folder name
    or a suggestion is wanted."""
    modules = _imported_after(
        "import gpuenv.lock.format, gpuenv.lock.model, gpuenv.lock.extras, gpuenv.store\n"
        "import gpuenv.knowledge.model, gpuenv.spec, gpuenv.install, gpuenv.cli._installing"
    )
    lazy = {"gpuenv.builds.model", "gpuenv.lock.builds", "packaging.requirements", "uuid"}
    assert not (lazy | {"difflib"}) & modules, (lazy | {"difflib"}) & modules
    assert "uuid" not in _imported_after("import gpuenv.builds.cache")
    # install's lock check: what locks a target, and what hashes a spec's inputs, load
    # only when a lock is written or judged in full (not for a lock found fresh before)
    relocking = {"gpuenv.lock.target", "gpuenv.lock.builds", "packaging.requirements"}
    assert not relocking & _imported_after("import gpuenv.lock.project, gpuenv.lock.inputs")


def test_hashing_a_cached_specs_inputs_parses_no_requirement(tmp_path: object) -> None:
    """A full `lock --check` (no note of these bytes) hashes each target's inputs from a
    spec read from its cache: the dependencies' names come from ``names.requirement_name``,
    and packaging's requirement parser (with markers, tags, sysconfig and logging: ~10 ms)
    does not load."""
    spec = (
        '[project]\nname = "p"\n[stack]\npython = "3.11"\ntorch = "2.4.1"\ncuda = "12.4"\n'
        '[targets.h100]\ngpu = "H100"\ndriver = "550.54.15"\n'
        '[pip]\ndependencies = ["flash-attn>=2.6", "transformers[torch]==4.44.0"]\n'
    )
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gpuenv.spec import parse_spec_text\n"
        "from gpuenv.lock.inputs import input_hash\n"
        "loaded = parse_spec_text(sys.argv[1], file='gpuenv.toml', cache_dir=Path(sys.argv[2]))\n"
        "print(input_hash(loaded.spec, 'h100', 'kb'))\n"
        "print('packaging.requirements' in sys.modules)\n"
    )

    def run() -> list[str]:
        argv = [sys.executable, "-c", code, spec, str(tmp_path)]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()

    validated = run()  # validated: pydantic, and packaging with it
    assert validated[1] == "True"
    cached = run()
    assert cached == [validated[0], "False"]


def test_torch_metadata_found_in_the_cache_loads_no_wheel_reader(tmp_path: object) -> None:
    """A relock reads the torch wheels' METADATA from gpuenv's cache: the wheel reader
    (lock.wheelmeta: zipfile, range requests) loads only for one not cached."""
    from gpuenv.lock import wheelcheck, wheelmeta

    assert wheelcheck.CACHED_LIMIT == wheelmeta.MAX_METADATA
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from gpuenv.lock.model import PipPackage, PipRequest\n"
        "from gpuenv.lock.wheelcheck import read_wheel_metadata\n"
        "cache = Path(sys.argv[1])\n"
        "sha = 'a' * 64\n"
        "(cache / 'wheel-metadata').mkdir(parents=True)\n"
        "text = 'Metadata-Version: 2.1\\nName: torch\\nVersion: 2.4.1+cu124\\n\\n'\n"
        "(cache / 'wheel-metadata' / f'{sha}.METADATA').write_text(text)\n"
        "url = 'https://i.invalid/torch-2.4.1%2Bcu124-cp311-cp311-linux_x86_64.whl'\n"
        "package = PipPackage('torch', '2.4.1+cu124', url, sha, None, ())\n"
        "request = PipRequest(requirements=('torch',), python='3.11', cache_dir=cache)\n"
        "assert read_wheel_metadata(object(), package, request) == text\n"
        "print('gpuenv.lock.wheelmeta' in sys.modules, 'zipfile' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_the_lock_and_install_paths_hash_their_small_texts_without_hashlib() -> None:
    """Content hashes, input hashes, the spec cache's key, the store's prefix names and
    the cache markers hash a few kilobytes: gpuenv._sha256 gives the same digests without
    hashlib's OpenSSL start-up (about 3 ms); hashlib loads only where artifacts are
    hashed (gpuenv._fetch.Digests, while bytes stream)."""
    modules = _imported_after(
        "import gpuenv.cli.lock_cmd, gpuenv.cli.install_cmd, gpuenv.lock.project\n"
        "import gpuenv.lock.target, gpuenv.lock.uv, gpuenv.lock.inputs, gpuenv.lock._noted\n"
        "import gpuenv.install, gpuenv.store, gpuenv._fetch, gpuenv.spec._cache\n"
        "import gpuenv.builds.model"
    )
    assert {"gpuenv.lock.target", "gpuenv._fetch"} <= modules
    assert not {"hashlib", "_hashlib"} & modules, {"hashlib", "_hashlib"} & modules


def test_the_install_path_parses_no_version_specifier_until_a_spec_is_validated() -> None:
    """`install` of a spec read from its cache with a fresh lock parses no specifier:
    packaging.specifiers (about 2.5 ms) loads with spec.parse_version_spec's first call
    (validation, planning), not with gpuenv.spec."""
    code = (
        "import gpuenv.spec, gpuenv.spec._cache, gpuenv.cli.install_cmd, gpuenv.install\n"
        "import gpuenv.lock.project, gpuenv.lock.format, gpuenv.lock.inputs\n"
    )
    assert "packaging.specifiers" not in _imported_after(code)
    parsed = _imported_after(
        code + "from gpuenv.spec import parse_version_spec\nassert parse_version_spec('2.4.*')"
    )
    assert "packaging.specifiers" in parsed


def test_a_warm_install_reads_its_lock_without_the_checkers_imports(tmp_path: object) -> None:
    """Lock bytes this gpuenv wrote (or read and found whole) are not checked again: the
    checks' wheel-tag parser (packaging.tags, with platform, sysconfig and logging) is not
    even imported; nor are concurrent.futures (logging again) for artifacts all in the
    store, platform for a Linux target, or packaging.version outside a relock. Bytes
    never seen are checked in full, and an edit is still found."""
    from pathlib import Path

    root = Path(str(tmp_path))
    cache = root / "cache"
    lock_file = root / "gpuenv.lock"
    repo = str(Path(__file__).resolve().parents[1])
    write = (
        "import sys\n"
        "from pathlib import Path\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.locked import cpu_target\n"
        "from gpuenv.lock.format import write_lock_file\n"
        "from gpuenv.lock.model import Lock\n"
        "write_lock_file(Path(sys.argv[2]), Lock('sha256:' + '0' * 64, {'cpu': cpu_target()}),"
        " cache_dir=Path(sys.argv[3]))\n"
    )
    subprocess.run([sys.executable, "-c", write, repo, str(lock_file), str(cache)], check=True)
    read = (
        "import sys\n"
        "from pathlib import Path\n"
        "import gpuenv.install, gpuenv.cli.install_cmd, gpuenv.lock.project, gpuenv._foreign\n"
        "from gpuenv._foreign import refuse\n"
        "from gpuenv.lock.format import load_lock\n"
        "refuse('cpu', 'linux-64', 'install')\n"
        "reading = load_lock(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))\n"
        "print(sorted(reading.lock.targets), sorted(reading.damaged))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )

    def read_back() -> tuple[str, set[str]]:
        out = subprocess.run(
            [sys.executable, "-c", read, str(lock_file), str(cache)],
            capture_output=True,
            text=True,
            check=True,
        )
        targets, modules = out.stdout.splitlines()
        return targets, set(modules.split())

    targets, modules = read_back()
    assert targets == "['cpu'] []"
    unused = {"gpuenv.lock._integrity", "packaging.tags", "packaging.version", "platform"}
    unused |= {"logging", "concurrent.futures", "gpuenv.lock.target"}
    assert not unused & modules, unused & modules
    lock_file.write_text(lock_file.read_text().replace("2.4.1+cpu", "2.4.2+cpu", 1))
    targets, modules = read_back()  # bytes never seen: checked, the edit found
    assert targets == "[] ['cpu']" and "gpuenv.lock._integrity" in modules


def test_the_console_script_collects_cycles_less_often(tmp_path: object) -> None:
    """The console script raises the collector's first threshold (start-up's objects all
    live to the exit; walking them ~60 times cost a lock 9-13 ms of CPU); a program that
    imports gpuenv keeps its own."""
    probe = (
        "import gc, os, sys\n"
        "from gpuenv.cli import GC_THRESHOLD, entry\n"
        "real_exit = os._exit\n"
        "def done(code):\n"
        "    os.write(1, f'{gc.get_threshold()[0]} {GC_THRESHOLD} {gc.isenabled()}'.encode())\n"
        "    real_exit(code)\n"
        "os._exit = done\n"
        "sys.argv = ['gpuenv', '--version']\n"
        "entry()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=str(tmp_path)
    )
    threshold, wanted, enabled = out.stdout.split()[-3:]
    assert threshold == wanted == "100000" and enabled == "True"
    library = "import gc\nimport gpuenv.cli\nprint(gc.get_threshold()[0])"
    out = subprocess.run(
        [sys.executable, "-c", library], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "700"


def test_the_install_path_creates_temporary_files_without_tempfile_or_shutil() -> None:
    """Atomic writes and the store's downloads make their temporary files themselves
    (``_fs.temporary_beside``): tempfile (with random) and shutil (with bz2 and lzma)
    are not imported by a warm install, and shutil loads only to remove something."""
    modules = _imported_after(
        "import gpuenv.install, gpuenv.cli.install_cmd, gpuenv.store, gpuenv._fetch\n"
        "import gpuenv._fs, gpuenv.install.project, gpuenv.activation"
    )
    assert not {"tempfile", "shutil", "random", "bz2", "lzma"} & modules


def test_temporary_files_are_made_as_mkstemp_makes_them(tmp_path: object) -> None:
    import os
    import stat
    from pathlib import Path

    from gpuenv._fs import temporary_beside

    target = Path(str(tmp_path)) / "gpuenv.lock"
    made = {temporary_beside(target, prefix=".gpuenv.lock.", suffix=".tmp") for _ in range(50)}
    names = {path for _fd, path in made}
    assert len(names) == 50  # a new name each time, never one that exists
    for fd, path in made:
        assert not os.get_inheritable(fd)  # closed on exec, as mkstemp's
        os.close(fd)
        assert path.parent == target.parent and path.name.startswith(".gpuenv.lock.")
        assert path.name.endswith(".tmp") and stat.S_IMODE(path.stat().st_mode) == 0o600
