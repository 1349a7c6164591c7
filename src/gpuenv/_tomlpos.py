"""Where each key and array element of a TOML document starts (line numbers).

Error messages name the file, the line and the key path; the standard-library
parser gives values without positions, so this small scanner walks the text once
and records the line of every key (``("targets", "h100", "driver")``), every array
element (``("pip", "dependencies", 2)``) and every table header. It assumes the
text already parsed as valid TOML, so it never has to report syntax errors itself.
"""

from __future__ import annotations

import re

Path = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.lines: dict[Path, int] = {}
        self.array_tables: dict[Path, int] = {}
        self.current: dict[Path, Path] = {}  # an array table's key -> its latest element

    # --- low-level -------------------------------------------------------------

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def advance(self, n: int = 1) -> None:
        chunk = self.text[self.pos : self.pos + n]
        self.line += chunk.count("\n")
        self.pos += n

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_space(self, *, newlines: bool) -> None:
        while not self.at_end():
            ch = self.peek()
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.advance()
            elif ch == "#":
                end = self.text.find("\n", self.pos)
                self.advance((len(self.text) if end < 0 else end) - self.pos)
            else:
                return

    def skip_string(self) -> str:
        """Skip a string of any of TOML's four kinds; return its (raw) content."""
        for quote in ('"""', "'''"):
            if self.peek(3) == quote:
                end = self.pos + 3
                while True:
                    end = self.text.index(quote, end)
                    if quote == '"""' and self._escaped(end):
                        end += 1
                        continue
                    break
                # A closing delimiter may be followed by up to two more quotes.
                while self.text[end + 3 : end + 4] == quote[0]:
                    end += 1
                content = self.text[self.pos + 3 : end]
                self.advance(end + 3 - self.pos)
                return content
        quote = self.peek()
        end = self.pos + 1
        while self.text[end] != quote or (quote == '"' and self._escaped(end)):
            end += 1
        content = self.text[self.pos + 1 : end]
        self.advance(end + 1 - self.pos)
        return content

    def _escaped(self, index: int) -> bool:
        backslashes = 0
        while self.text[index - 1 - backslashes] == "\\":
            backslashes += 1
        return backslashes % 2 == 1

    # --- keys --------------------------------------------------------------------

    def key(self) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self.skip_space(newlines=False)
            if self.peek() in "\"'":
                parts.append(self.skip_string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if not match:
                    break
                parts.append(match.group(0))
                self.advance(match.end() - self.pos)
            self.skip_space(newlines=False)
            if self.peek() != ".":
                break
            self.advance()
        return tuple(parts)

    # --- values --------------------------------------------------------------------

    def value(self, path: Path) -> None:
        ch = self.peek()
        if ch in "\"'":
            self.skip_string()
        elif ch == "[":
            self.array(path)
        elif ch == "{":
            self.inline_table(path)
        else:
            while not self.at_end() and self.peek() not in ",]}\n#":
                self.advance()

    def array(self, path: Path) -> None:
        self.advance()  # [
        index = 0
        while True:
            self.skip_space(newlines=True)
            if self.peek() == "]":
                self.advance()
                return
            element: Path = (*path, index)
            self.lines[element] = self.line
            self.value(element)
            index += 1
            self.skip_space(newlines=True)
            if self.peek() == ",":
                self.advance()

    def inline_table(self, path: Path) -> None:
        self.advance()  # {
        while True:
            self.skip_space(newlines=True)
            if self.peek() == "}":
                self.advance()
                return
            if not self.key_value(path):
                raise ValueError("not valid TOML: no key in an inline table")
            self.skip_space(newlines=True)
            if self.peek() == ",":
                self.advance()

    # --- document --------------------------------------------------------------------

    def header(self) -> Path:
        double = self.peek(2) == "[["
        self.advance(2 if double else 1)
        written = self.key()
        self.advance(2 if double else 1)
        key = self._within(written)
        # The tables a dotted header creates implicitly are on its line too: a misspelt
        # [target.cpu] was reported as "target: unknown key" with no line.
        for end in range(1, len(key)):
            self.lines.setdefault(key[:end], self.line)
        if not double:
            self.lines.setdefault(key, self.line)
            return key
        index = self.array_tables.get(key, -1) + 1
        self.array_tables[key] = index
        self.lines.setdefault(key, self.line)
        entry: Path = (*key, index)
        self.lines[entry] = self.line
        self.current[written] = entry
        return entry

    def _within(self, key: tuple[str, ...]) -> Path:
        """``[[series.builds]]`` after the second ``[[series]]`` is ``series.1.builds``: a
        header below an array table belongs to that table's latest element."""
        for end in range(len(key) - 1, 0, -1):
            parent = self.current.get(key[:end])
            if parent is not None:
                return (*parent, *key[end:])
        return key

    def document(self) -> dict[Path, int]:
        table: Path = ()
        while True:
            self.skip_space(newlines=True)
            if self.at_end():
                return self.lines
            if self.peek() == "[":
                table = self.header()
                continue
            if not self.key_value(table):  # not valid TOML; stop rather than loop
                return self.lines

    def key_value(self, within: Path) -> bool:
        """``key = value`` in the table ``within``, the key's line recorded; False (and
        nothing read) where no key starts."""
        line = self.line
        key = self.key()
        if not key:
            return False
        member: Path = (*within, *key)
        self.lines[member] = line
        self.skip_space(newlines=False)
        self.advance()  # =
        self.skip_space(newlines=False)
        self.value(member)
        return True


def key_lines(text: str) -> dict[Path, int]:
    """Map every key path and array element in ``text`` to the line it starts on."""
    try:
        return _Scanner(text).document()
    except (ValueError, IndexError):  # malformed input: positions are a courtesy
        return {}


def line_of(lines: dict[Path, int], path: Path) -> int | None:
    """The line of ``path``, or of its nearest ancestor that has one."""
    for end in range(len(path), 0, -1):
        found = lines.get(path[:end])
        if found is not None:
            return found
    return None
