"""The store's artifacts on the tests' local index (a server that counts requests):

- pack after install: time and artifact bytes downloaded, against a pack from an empty
  store (what every pack cost when pack kept its own cache);
- install --from into a fresh store, and of an archive already installed;
- gc after the project is deleted: its time and the bytes it reports against what the
  file system's free count (statvfs) moved by (the store on a tmpfs of its own when
  this runs as root, so that nobody else's writes move the count), and ``uv cache
  prune`` on the same uv cache beside it.

Medians of --runs runs; the fixture's wheels are small, so times are mostly fixed costs.
Usage: .venv/bin/python bench/store.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _project import REPO, Bench, bench_index
from _timing import compiled, interpreter, load
from tests.fixtures.pkgindex.index import Seen

SUFFIXES = (".whl", ".tar.gz", ".conda", ".tar.bz2")


def gpuenv(bench: Bench, cwd: Path, *args: str, home: Path | None = None) -> tuple[float, str]:
    env = {**bench.env, "PYTHONPATH": str(REPO / "src")}
    if home is not None:
        env["GPUENV_HOME"] = str(home)
    started = time.perf_counter()
    done = subprocess.run(
        [interpreter(), "-m", "gpuenv", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"gpuenv {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return took, done.stdout


def downloaded(seen: Seen, tree: Path, since: int) -> int:
    with seen.lock:
        paths = [p.split("?", 1)[0] for p, _a in seen.requests[since:]]
    from urllib.parse import unquote

    return sum(
        (tree / unquote(p).lstrip("/")).stat().st_size for p in paths if p.endswith(SUFFIXES)
    )


def free(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bfree * info.f_frsize


def own_fs(mount: Path) -> Path:
    """A tmpfs at ``mount`` when this runs as root and may mount one, else a folder."""
    mount.mkdir()
    if os.geteuid() == 0 and shutil.which("mount"):
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1g", "tmpfs", str(mount)],
            capture_output=True,
            check=False,
        )
        MOUNTS.append(mount)
    return mount


MOUNTS: list[Path] = []


def one_round(bench: Bench, seen: Seen, root: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    project = root / "project"
    project.mkdir()
    (project / "gpuenv.toml").write_text(bench.spec("cpu"))
    store = own_fs(root / "fs") / "store"
    gpuenv(bench, project, "lock", "--target", "cpu", home=store)
    gpuenv(bench, project, "install", "--target", "cpu", home=store)
    mark = len(seen.requests)
    out["pack after install s"], _ = gpuenv(
        bench, project, "pack", "--target", "cpu", "-o", str(root / "a.tar"), home=store
    )
    out["pack after install bytes downloaded"] = downloaded(seen, bench.root / "index", mark)
    mark = len(seen.requests)
    out["pack from an empty store s"], _ = gpuenv(
        bench, project, "pack", "--target", "cpu", "-o", str(root / "b.tar"), home=root / "empty"
    )
    out["pack from an empty store bytes downloaded"] = downloaded(seen, bench.root / "index", mark)

    offline = root / "offline"
    offline.mkdir()
    air = root / "air-store"
    out["install --from fresh s"], _ = gpuenv(
        bench, offline, "install", "--from", str(root / "a.tar"), home=air
    )
    out["install --from installed s"], _ = gpuenv(
        bench, offline, "install", "--from", str(root / "a.tar"), home=air
    )

    shutil.rmtree(project)
    keeper = root / "keeper"
    keeper.mkdir()
    (keeper / "gpuenv.toml").write_text(bench.spec("cpu"))
    _, dry = gpuenv(bench, keeper, "gc", "--grace", "0", "--dry-run", "--json", home=store)
    before = free(store)
    out["gc s"], real = gpuenv(bench, keeper, "gc", "--grace", "0", "--json", home=store)
    out["gc statvfs freed bytes"] = free(store) - before
    out["gc reported bytes"] = json.loads(real)["freed_bytes"]
    out["gc dry-run bytes"] = json.loads(dry)["freed_bytes"]
    uv = shutil.which("uv", path=str(Path(interpreter()).parent)) or "uv"
    started = time.perf_counter()
    subprocess.run(
        [uv, "cache", "prune", "--cache-dir", str(air / "cache" / "uv")],
        capture_output=True,
        check=False,
    )
    out["uv cache prune (install --from's cache) s"] = time.perf_counter() - started
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compiled()
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="gpuenv-bench-store-") as tmp:
        seen = Seen()
        with bench_index(Path(tmp), seen=seen) as bench:
            try:
                for n in range(args.runs):
                    root = Path(tmp) / f"round{n}"
                    root.mkdir()
                    rounds.append(one_round(bench, seen, root))
            finally:
                for mount in MOUNTS:
                    subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)
    print(f"bench/store.py: medians of {args.runs} rounds; {load()}")
    for key in rounds[0]:
        value = statistics.median(r[key] for r in rounds)
        shown = f"{value * 1000:9.1f} ms" if key.endswith(" s") else f"{value:12.0f}"
        print(f"  {key.removesuffix(' s'):<46} {shown}")


if __name__ == "__main__":
    main()
