"""The documentation in the repository: the README stays a short entry whose commands CI
runs and which states how many distributions a plain install brings, every link and cited
page exists, messages cite pages through one helper, and the reference pages name
everything they claim to (every spec key, command, flag, exit code and variable)."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import inspect
import json
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpuenv import errors
from gpuenv.cli._parser import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's) gives a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page: Path) -> set[str]:
    out, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (found := re.match(r"#{1,6} (.+)", line)):
            out.add(_slug(found.group(1)))
    return out


def _code(text: str, first_line: str) -> str:
    found = re.search(r"```sh\n(" + re.escape(first_line) + r".*?)\n```", text, re.S)
    assert found, f"no sh block starting {first_line!r}"
    return found.group(1)


def test_the_readme_is_a_short_entry_whose_test_command_ci_runs_exactly() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    install = _code(text, "python3 -m venv .venv && .venv/bin/pip install -e . ")
    assert install.endswith("gpuenv -f examples/h100-and-cpu/gpuenv.toml plan")
    tests = _code(text, "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()


def _runtime_closure() -> set[str]:
    """The distributions ``pip install gpuenv`` brings here: gpuenv's requirements without
    extras, then theirs, each marker judged on this Python."""
    seen: set[str] = set()
    todo = ["gpuenv"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_the_readme_states_the_runtime_dependency_count_and_it_stays_small() -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    stated = re.search(r"`pip install gpuenv` installs (\d+) distributions", text)
    on_310 = re.search(r"(\d+) on Python 3\.10", text)
    assert stated and on_310, "say in the README how many distributions a plain install brings"
    expected = int(stated.group(1) if sys.version_info >= (3, 11) else on_310.group(1))
    closure = _runtime_closure()
    # At most: an older release of a dependency (pydantic before typing-inspection) brings
    # fewer; one more than the README says is a new dependency to weigh and state.
    assert len(closure) <= expected, f"the README says {expected}, not {sorted(closure)}"
    assert expected <= 20  # issue 27: a plain install stays light


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_at_a_page_and_heading_that_exist(page: Path) -> None:
    fenced, broken = False, []
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        for target in [] if fenced else LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or (
                anchor and dest.suffix == ".md" and anchor not in _anchors(dest)
            ):
                broken.append(target)
    assert not broken


def test_the_docs_index_links_every_page() -> None:
    """docs/README.md is where a reader looks for a page: a new page is listed there."""
    index = DOCS / "README.md"
    linked = {
        (DOCS / target.partition("#")[0]).resolve()
        for target in LINK.findall(index.read_text(encoding="utf-8"))
    }
    unlisted = [str(p.relative_to(DOCS)) for p in PAGES if p != index and p not in linked]
    assert len(linked) > 20
    assert not unlisted, f"link these from docs/README.md: {unlisted}"


def test_every_page_a_message_cites_exists_with_its_section() -> None:
    cited = []
    for source in (ROOT / "src" / "gpuenv").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "doc":
                cited.append([ast.literal_eval(arg) for arg in node.args])
    assert len(cited) >= 2
    for page, *section in cited:
        assert (DOCS / page).is_file(), page
        assert not section or section[0] in _anchors(DOCS / page), (page, section)
    assert "README.md," not in "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "src" / "gpuenv").rglob("*.py")
    )


# Modules whose strings name an imported repository's README.md or docs/INSTALL.md (what
# `gpuenv import` reads), never a page of gpuenv's own documentation.
_NAMES_OTHER_READMES = frozenset({Path("src/gpuenv/importers/readme.py")})


def test_messages_cite_a_docs_page_only_through_the_helper() -> None:
    """A page named in a message, a help text or a constant goes through ``_docs.doc``, so
    the test above checks it; docstrings and comments may name pages freely."""
    cites = re.compile(r"\bdocs/|\bREADME\b|\.md#")
    loose = []
    for source in sorted((ROOT / "src" / "gpuenv").rglob("*.py")):
        if source.name == "_docs.py" or source.relative_to(ROOT) in _NAMES_OTHER_READMES:
            continue
        tree = ast.parse(source.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        loose += [
            f"{source.relative_to(ROOT)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and cites.search(node.value)
        ]
    assert not loose, f"cite these pages through gpuenv._docs.doc: {loose}"


def test_every_style_rule_the_code_cites_is_in_the_style_guide() -> None:
    """``style.md R6`` in a docstring, a contract or CI names a rule the guide has."""
    rules = set(
        re.findall(r"^\*\*(R\d+)\.", (DOCS / "dev" / "style.md").read_text(encoding="utf-8"), re.M)
    )
    places = [*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    places += [*(ROOT / "tools").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    places += [ROOT / "pyproject.toml", ROOT / ".ci" / "run"]
    cited = {}
    for place in places:
        for first, last in re.findall(
            r"style\.md (R\d+)(?:-R(\d+))?", place.read_text(encoding="utf-8")
        ):
            span = range(int(first[1:]), int(last or first[1:]) + 1)
            cited |= {f"R{n}": place.relative_to(ROOT) for n in span}
    assert len(cited) >= 4
    missing = {rule: str(place) for rule, place in cited.items() if rule not in rules}
    assert not missing, f"docs/dev/style.md has no such rule: {missing}"


def test_the_exit_code_table_names_every_error_class_with_its_code_and_kind() -> None:
    text = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0][:1].isdigit():
            rows[cells[0]] = cells[2]
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.GpuenvError)
    ]
    for cls in classes:
        if cls is errors.GpuenvError:
            continue
        row = rows.get(str(cls.exit_code), "")
        assert f"`{cls.__name__}` (`{cls.kind}`)" in row or (
            f"`{cls.__name__}`" in row and f"(`{cls.kind}`)" in row
        ), cls.__name__
    assert {"0", "1", "2", "3", "4", "5", "70"} <= set(rows)


def _schema_keys() -> set[str]:
    schema = json.loads((ROOT / "schemas" / "gpuenv.schema.json").read_text(encoding="utf-8"))
    defs = schema["$defs"]
    keys = set()
    for table, node in schema["properties"].items():
        ref = node.get("$ref") or next(
            (n["$ref"] for n in node.get("anyOf", []) if "$ref" in n),
            None,
        )
        if table == "targets":
            ref = "#/$defs/Target"
        for key in defs[ref.rsplit("/", 1)[1]]["properties"] if ref else ():
            keys.add(f"{table}.{key}")
    for key in defs["Build"]["properties"]:
        keys.add(f"pip.build.{key}")
    for key in defs["TargetPip"]["properties"]:
        keys.add(f"targets.pip.{key}")
    return keys


def test_the_spec_reference_names_every_key_of_the_schema() -> None:
    text = (DOCS / "reference" / "gpuenv-toml.md").read_text(encoding="utf-8")
    named = set()
    for written, key in re.findall(r"`\[([a-zA-Z.]+)\](?: ([a-z-]+))?`", text):
        table = re.sub(r"\.(NAME|PKG)\b", "", written)  # [targets.NAME.pip] is targets.pip
        named.add(f"{table}.{key}" if key else table)
    keys = _schema_keys()
    assert len(keys) > 30
    assert keys <= named, f"document in docs/reference/gpuenv-toml.md: {sorted(keys - named)}"


def test_the_environment_reference_names_every_variable_gpuenv_reads() -> None:
    text = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    read = set()
    for source in (ROOT / "src" / "gpuenv").rglob("*.py"):
        read |= set(re.findall(r"""["'](GPUENV_[A-Z_]+[A-Z])["']""", source.read_text()))
    read -= {"GPUENV_CONDA", "GPUENV_PIP", "GPUENV_DEFAULT"}  # heredoc words, an index name
    assert len(read) > 10
    missing = [v for v in sorted(read) if f"`{v}" not in text]
    assert not missing, f"document these in docs/reference/environment.md: {missing}"


def test_the_environment_reference_names_every_other_variable_gpuenv_reads() -> None:
    """Variables gpuenv does not own but reads (XDG, Slurm, the shells, what doctor
    examines), each as a read in the code writes it: ``environ.get("X")``,
    ``environ["X"]``, ``getenv("X")``, ``env_override("X")``, ``env_dir(environ, "X")``."""
    text = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    reads = re.compile(
        r"""(?:environ\.get\(|environ\[|getenv\(|env_override\(|env_dir\(\w+(?:\.environ)?,)\s*"""
        r"""["']([A-Z][A-Z0-9_]+)["']"""
    )
    read = set()
    for source in (ROOT / "src" / "gpuenv").rglob("*.py"):
        read |= set(reads.findall(source.read_text(encoding="utf-8")))
    assert {"CUDA_HOME", "SLURM_JOB_ID", "XDG_CACHE_HOME", "ZDOTDIR"} <= read
    missing = [v for v in sorted(read) if not re.search(f"`{v}[`=]", text)]
    assert not missing, f"document these in docs/reference/environment.md: {missing}"


def _undocumented(parser: argparse.ArgumentParser, words: str, text: str) -> list[str]:
    """What ``parser`` (the command ``words``) offers that ``text`` does not name: its
    subcommands (``gpuenv kernel install``), long flags and the choices of its operands
    (``export``'s formats), then the same for each subcommand."""
    missing = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or "--help" in action.option_strings:
            continue
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                command = f"{words} {name}"
                if f"`{command}" not in text and f"/ {command}" not in text:
                    missing.append(command)
                missing += _undocumented(sub, command, text)
            continue
        missing += [
            f"{words} {flag}"
            for flag in action.option_strings
            if flag.startswith("--") and flag not in text
        ]
        if not action.option_strings and action.choices is not None:
            missing += [f"{words} {c}" for c in action.choices if f"`{c}`" not in text]
    return missing


def test_the_command_reference_names_every_command_flag_and_choice() -> None:
    text = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    missing = []
    for name in COMMANDS:
        missing += _undocumented(build_parser(only=name), "gpuenv", text)
    missing = sorted(set(missing))  # the global options, once for each command's parser
    assert not missing, f"document these in docs/reference/commands.md: {missing}"
    walked = _undocumented(build_parser(only="kernel"), "gpuenv", "")
    assert {"gpuenv kernel install", "gpuenv kernel install --name"} <= set(walked)
    walked = _undocumented(build_parser(only="export"), "gpuenv", "")
    assert {"gpuenv export conda-lock", "gpuenv export slurm", "gpuenv --version"} <= set(walked)


# Named once, in the paragraph under the table, for every command.
GLOBAL_FLAGS = {"--help", "--file", "--verbose", "--quiet", "--version"}


def _flags(parser: argparse.ArgumentParser, words: str) -> list[tuple[str, str]]:
    """(command, long flag) for ``parser`` and each of its subcommands, hidden flags and
    the global ones left out."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _flags(sub, f"{words} {name}")
        elif action.help != argparse.SUPPRESS:
            found += [
                (words, flag)
                for flag in action.option_strings
                if flag.startswith("--") and flag not in GLOBAL_FLAGS
            ]
    return found


def test_each_command_row_of_the_reference_names_its_own_flags() -> None:
    """Not only somewhere on the page: ``kernel``'s ``--json``, ``init``'s ``--force``
    and ``shell``'s ``--unverified`` were in no row of theirs (another row's mention
    satisfied the page-wide check)."""
    text = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `gpuenv ")]
    missing = []
    for name in COMMANDS:
        for words, flag in _flags(build_parser(only=name), "gpuenv"):
            own = [row for row in rows if f"`{words}" in row]
            if not any(flag in row for row in own):
                missing.append(f"{words} {flag}")
    assert not missing, f"name these in their rows of docs/reference/commands.md: {missing}"


def _resolves(dotted: str) -> bool:
    """``lock.project.plan_relock``: the longest importable ``gpuenv.`` module, then
    attributes (so a name re-exported by a package's ``__init__`` counts)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(["gpuenv", *parts[:cut]]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        return found is not None
    return False


def test_the_lock_and_install_walkthroughs_name_code_that_exists() -> None:
    """Every module, path, function and class the ``gpuenv lock`` and ``gpuenv install``
    sections of the architecture map name is still there, so a refactoring that moves one
    updates the page a newcomer follows."""
    text = (DOCS / "dev" / "architecture.md").read_text(encoding="utf-8")
    walk = text[text.index("## `gpuenv lock`") : text.index("## Where the facts live")]
    root = ROOT / "src" / "gpuenv"
    sources = [p.read_text(encoding="utf-8") for p in root.rglob("*.py")]
    names = {p.stem for p in root.rglob("*.py")} | {p.parent.name for p in root.rglob("*.py")}
    stale, checked = [], 0
    for token in set(re.findall(r"`([^`\s]+)`", walk)):
        if "/" in token and token.endswith(".py"):
            ok = (root / token).is_file()
        elif re.fullmatch(r"[a-z_]+(\.[A-Za-z_]+)+", token):
            ok = _resolves(token)
        elif re.fullmatch(r"[a-z_][a-z0-9_]*|[A-Z][A-Za-z]+", token):
            defined = re.compile(rf"^\s*(?:def|class) {token}\b", re.M)
            ok = token in names or any(defined.search(s) for s in sources)
        else:
            continue  # a flag, a path in a project, a command line
        checked += 1
        if not ok:
            stale.append(token)
    assert checked > 40
    assert not stale, f"docs/dev/architecture.md names what src no longer has: {sorted(stale)}"


def test_the_architecture_map_names_every_top_level_module_and_package() -> None:
    text = (DOCS / "dev" / "architecture.md").read_text(encoding="utf-8")
    root = ROOT / "src" / "gpuenv"
    missing = [
        p.name
        for p in sorted(root.iterdir())
        if not p.name.startswith("__")
        and (
            ((p / "__init__.py").is_file() and f"`{p.name}/`" not in text)
            or (p.suffix == ".py" and f"`{p.name}`" not in text)
        )
    ]
    assert not missing, f"say in docs/dev/architecture.md what these are: {missing}"
