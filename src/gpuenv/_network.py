"""Network settings, the same for ``lock`` and ``install``: indexes and their
credentials, the environment uv runs with, mirrors, and what a network failure was.

- ``uv_environment`` is the one function that builds uv's environment, for every uv
  call of lock and of install. uv is isolated from the user's *resolution* settings
  (``UV_INDEX_URL``, ``UV_CONSTRAINT``, ``PIP_*``, a ``uv.toml``: ``--no-config``), but
  keeps every *network* setting: proxies (``HTTP(S)_PROXY``, ``ALL_PROXY``,
  ``NO_PROXY``), certificates (``SSL_CERT_FILE``, ``SSL_CERT_DIR``, ``SSL_CLIENT_CERT``,
  ``UV_SYSTEM_CERTS``, the older ``UV_NATIVE_TLS``), timeouts and retries
  (``UV_HTTP_TIMEOUT``, ``UV_HTTP_CONNECT_TIMEOUT``, ``UV_HTTP_RETRIES``), ``UV_OFFLINE``,
  ``UV_INSECURE_HOST``, credentials (``NETRC``, ``UV_KEYRING_PROVIDER``,
  ``UV_CREDENTIALS_DIR`` and ``UV_INDEX_GPUENV_*_USERNAME/_PASSWORD``).
- ``Index``: an index by gpuenv's name for it (``gpuenv-default``, ``gpuenv-extra-N``,
  ``gpuenv-torch``, ``gpuenv-mirror-N``); credentials in its URL go to uv as
  ``UV_INDEX_<NAME>_USERNAME/_PASSWORD``, never on a command line or in a file.
- ``Mirrors``: URL prefix rewrites configured outside the project (``load_mirrors``).
  Resolution, downloads and gpuenv's own reads of the wheels' metadata go through the
  mirror (``fetch_url``, with the credentials uv is given: ``_fetch.fetch_credentials``);
  the lock keeps the canonical URL.
- ``classify``: name resolution, refused, timeout, TLS, 401/403, 404 from uv's or
  rattler's error text.

Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from gpuenv._redact import redact, redact_url, remember_secret
from gpuenv.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpuenv.errors import NetworkError

# One token of printable characters: a NUL byte cannot reach a process's arguments
# (exit 70 from subprocess) and other control characters have no place in a URL.
_URL = re.compile(r"(?:https?|file)://[^\s\x00-\x1f\x7f]+\Z")


def is_fetchable_url(url: str) -> bool:
    """Whether ``url`` is one URL gpuenv can hand to uv and rattler: http(s) or file, one
    token (no whitespace), and parseable to the port (``http://127.].0.1/`` or a port of
    99999 would crash whatever reads it). The one check for spec keys, overrides and
    the lock reader."""
    if not _URL.match(url):
        return False
    try:
        _ = urlsplit(url).port  # parses the host and the port too
    except ValueError:
        return False
    return True


# What a download may send when neither the lock nor the index declares its size: far
# above any artifact gpuenv locks (PyTorch's largest CUDA wheels are about 2.5 GiB), far
# below filling a disk from a mirror whose body never ends.
MAX_DOWNLOAD_BYTES = 16 << 30
NETRC_LIMIT = 1 << 20


def download_cap(declared: int | None) -> int:
    """The most bytes a download of an artifact may send: its declared size (the lock's
    or the index's), else ``MAX_DOWNLOAD_BYTES``. Every downloader stops there."""
    return declared if declared is not None and declared >= 0 else MAX_DOWNLOAD_BYTES


def netrc_auth(host: str, environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(login, password)`` for ``host`` from ``$NETRC`` or ``~/.netrc``, or None. The
    file is checked by the bounded reader first: a FIFO (which hung ``pack``), a device,
    a file over 1 MiB or one that is not UTF-8 gives no credentials, never a hang or a
    crash."""
    import netrc
    import os

    from gpuenv import _fsread
    from gpuenv.errors import FileFormatError

    env = os.environ if environ is None else environ
    from gpuenv._home import home_dir

    path = env.get("NETRC") or str(Path(home_dir(env)) / ".netrc")
    try:
        _fsread.read_text(path, limit=NETRC_LIMIT, what="netrc file")
        found = netrc.netrc(path).authenticators(host)
    except (OSError, FileFormatError, netrc.NetrcParseError, ValueError):
        return None
    if found is None:
        return None
    login, _account, password = found
    return (login, password or "") if login else None


def join_index(base: str, child: str) -> str:
    """The index ``child`` below ``base`` (``https://h/whl`` + ``cu124``), its query kept
    at the end: a base with ``?token=...`` gave ``https://h/whl?token=...//cu124``."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + child))


def literal_url(url: str) -> str:
    """``url`` in a form no requirements-file reader expands: uv and pip replace
    ``${NAME}`` in a requirements file by the installing machine's environment variable,
    so an index linking to ``...?x=${SECRET}`` would collect it. ``$`` is written
    ``%24`` there, which every server reads as the same character."""
    return url.replace("${", "%24{")


# The width uv is told its terminal has: wide enough that no message of uv's wraps.
UV_COLUMNS = "1000"

DEFAULT_INDEX_NAME = "gpuenv-default"
TORCH_INDEX_NAME = "gpuenv-torch"

# Network settings of uv's own that pass through (everything else UV_* is dropped).
_KEPT_UV = frozenset(
    {
        "UV_SYSTEM_CERTS",
        "UV_HTTP_TIMEOUT",
        "UV_HTTP_CONNECT_TIMEOUT",
        "UV_REQUEST_TIMEOUT",
        "UV_HTTP_RETRIES",
        "UV_OFFLINE",
        "UV_INSECURE_HOST",
        "UV_KEYRING_PROVIDER",
        "UV_CREDENTIALS_DIR",
        "UV_CONCURRENT_DOWNLOADS",
    }
)
_GPUENV_INDEX_CREDENTIAL = re.compile(r"^UV_INDEX_GPUENV_[A-Z0-9_]+_(USERNAME|PASSWORD)$")


def is_network_setting(name: str) -> bool:
    """Whether ``name`` is one of uv's network settings that every uv call keeps (the
    module doc): proxies and certificates are not ``UV_*`` and are always kept."""
    return name in _KEPT_UV or name == "UV_NATIVE_TLS" or bool(_GPUENV_INDEX_CREDENTIAL.match(name))


def _is_dropped(name: str) -> bool:
    if name != "UV_NATIVE_TLS" and is_network_setting(name):
        return False
    return name.startswith(("UV_", "PIP_")) or name in ("VIRTUAL_ENV", "UV")


# uv's numeric settings that pass through: (what the number is, smallest, largest). uv
# parses each as an unsigned integer at start-up and refuses anything else; an empty one
# is unset.
_UV_NUMBERS = {
    "UV_HTTP_TIMEOUT": ("a whole number of seconds", 0, 2**64 - 1),
    "UV_HTTP_CONNECT_TIMEOUT": ("a whole number of seconds", 0, 2**64 - 1),
    "UV_REQUEST_TIMEOUT": ("a whole number of seconds", 0, 2**64 - 1),
    "UV_HTTP_RETRIES": ("a whole number of retries", 0, 2**32 - 1),
    "UV_CONCURRENT_DOWNLOADS": ("a whole number above zero", 1, 2**64 - 1),
}
_UNSIGNED = re.compile(r"^\+?[0-9]+$")


def _check_uv_numbers(environ: Mapping[str, str]) -> None:
    """A network setting uv would refuse is the user's to fix, named here: uv's own
    refusal came back under the failing step's sentence and fix ('no Python 3.11 for
    target prefix ...: install Python 3.11 here' for UV_HTTP_TIMEOUT=-1)."""
    for name, (what, low, high) in _UV_NUMBERS.items():
        value = environ.get(name)
        if not value:
            continue
        number = int(value) if _UNSIGNED.match(value) else None
        if number is not None and low <= number <= high:
            continue
        bound = f" up to {high}" if number is not None and number > high else ""
        raise UsageError(
            f"{name}={value!r} is not {what}{bound}: uv, which gpuenv runs, refuses it",
            hint=f"unset {name}, or set it to {what}, e.g. {name}={max(low, 30)}",
        )


_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h", "socks4", "socks4a")


def _check_proxies(environ: Mapping[str, str]) -> None:
    """A proxy URL no client can use is named (uv ignored 'not a url', 'http://[bad' and
    'ftp://...' without a word and went direct: on a network reached only through the
    proxy, the failure blamed the index). A bare host:port is a proxy, as curl reads it."""
    for name in dict.fromkeys(n for names in _PROXY_VARIABLES.values() for n in names):
        value = environ.get(name, "").strip()
        if value and not _usable_proxy(value):
            # Not parsable, so not redactable: whatever stands before an @ is left out.
            scheme, sep, rest = value.rpartition("://")
            shown = (scheme + sep if sep else "") + ("***@" if "@" in rest else "")
            shown += rest.rpartition("@")[2]
            raise UsageError(
                f"{name}={shown!r} is not a proxy URL uv can use: it would be "
                "ignored, and the index asked directly",
                hint=f"set {name} to http://HOST:PORT (or https://, socks5://), or unset it",
            )


def _usable_proxy(value: str) -> bool:
    if any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value if "://" in value else f"http://{value}")
        port = parts.port
    except ValueError:  # a bad port, an unclosed [
        return False
    return parts.scheme.lower() in _PROXY_SCHEMES and bool(parts.hostname) and port != 0


# Settings that name a file: uv runs in a scratch folder for a lock, so a relative one
# (NETRC=../netrc) worked for install and failed the lock with a hint to set it.
_PATH_SETTINGS = ("NETRC", "SSL_CERT_FILE", "SSL_CERT_DIR", "SSL_CLIENT_CERT")


def uv_environment(
    environ: Mapping[str, str],
    indexes: Iterable[Index] = (),
    *,
    mirrors: Mirrors | None = None,
    **fixed: str,
) -> dict[str, str]:
    """The environment for a uv call of lock or install: ``environ`` without uv's and
    pip's resolution settings, with its network settings (see the module doc; a relative
    file setting made absolute), the credentials of ``indexes``, and the caller's
    ``fixed`` settings (caches, links). An index reached through one of ``mirrors``
    also takes the credentials given by the mirror's name (``UV_INDEX_GPUENV_MIRROR_N``),
    as an install does. A numeric network setting uv would refuse is a ``UsageError``
    naming it."""
    _check_uv_numbers(environ)
    _check_proxies(environ)
    env = {k: v for k, v in environ.items() if not _is_dropped(k)}
    for name in _PATH_SETTINGS:
        value = env.get(name)
        if value and not os.path.isabs(value):  # noqa: PTH117
            env[name] = os.path.abspath(value)  # noqa: PTH100
    native = environ.get("UV_NATIVE_TLS")
    if native is not None and "UV_SYSTEM_CERTS" not in environ:
        env["UV_SYSTEM_CERTS"] = native  # uv 0.13's name; the old one only warns
    # uv wraps its messages at $COLUMNS: at a fixed width, lock._uv_output reads the
    # same lines whatever the terminal (at 80 columns a hint fell out of the tail read).
    env.update(UV_NO_CONFIG="1", UV_NO_PROGRESS="1", NO_COLOR="1", COLUMNS=UV_COLUMNS)
    indexes = tuple(indexes)
    for index in indexes:
        env.update(index.env())
    for one, other in mirrors.same_place(indexes) if mirrors is not None else ():
        for part in ("USERNAME", "PASSWORD"):  # one name's credentials serve both
            keys = [f"UV_INDEX_{env_key(name)}_{part}" for name in (one, other)]
            for own, given in (keys, keys[::-1]):
                if own not in env and given in environ:
                    env[own] = environ[given]
    env.update(fixed)
    return env


def network_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The network part of a uv environment (what lock and install must agree on)."""
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    wanted = {*names, *(n.lower() for n in names), "SSL_CERT_FILE", "SSL_CERT_DIR"}
    wanted |= {"SSL_CLIENT_CERT", "NETRC", *_KEPT_UV}
    return {
        k: v
        for k, v in env.items()
        if k in wanted or k.startswith("UV_INDEX_GPUENV_") or k == "UV_NO_CONFIG"
    }


# --- indexes -------------------------------------------------------------------------------


def strip_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (query and everything else kept: uv needs them)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass(frozen=True)
class Index:
    """One index as uv sees it: a name, a URL without userinfo, credentials aside."""

    name: str
    url: str  # userinfo removed; a query (an index token) kept, for uv
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, name: str, url: str) -> Index:
        parts = urlsplit(url)
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        remember_secret(password)
        for _name, value in _query_secrets(parts.query):
            remember_secret(value)
        return cls(name, strip_userinfo(url), username, password)

    @property
    def shown(self) -> str:
        """The URL as messages and the lock show it."""
        return redact_url(self.url)

    def env(self) -> dict[str, str]:
        """uv reads an index's credentials from ``UV_INDEX_<NAME>_USERNAME/_PASSWORD``."""
        key = env_key(self.name)
        out = {}
        if self.username is not None:
            out[f"UV_INDEX_{key}_USERNAME"] = self.username
        if self.password is not None:
            out[f"UV_INDEX_{key}_PASSWORD"] = self.password
        return out


def env_key(name: str) -> str:
    """``gpuenv-extra-1`` -> ``GPUENV_EXTRA_1`` (as uv spells an index in variables)."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def _query_secrets(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    from gpuenv._redact import is_secret_param

    return [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if is_secret_param(k)]


def pip_indexes(default: str | None, extras: Iterable[str], torch: str | None) -> tuple[Index, ...]:
    """The indexes of one pip resolution (or install), by gpuenv's names."""
    out = [Index.parse(DEFAULT_INDEX_NAME, default)] if default else []
    out += [Index.parse(f"gpuenv-extra-{i}", url) for i, url in enumerate(extras, 1)]
    if torch:
        out.append(Index.parse(TORCH_INDEX_NAME, torch))
    return tuple(out)


# --- mirrors ---------------------------------------------------------------------------------

SITE_CONFIG = Path("/etc/gpuenv/config.toml")
_MAX_CONFIG_BYTES = 1 << 20
_PAIR = re.compile(r"^(?P<canonical>[^=\s]+?)=(?P<mirror>[A-Za-z][A-Za-z0-9+.-]*://\S+)$")


def _under(url: str, prefix: str) -> bool:
    """Whether ``url`` is ``prefix`` or lies below it (on a path boundary)."""
    base = prefix.rstrip("/")
    return url == base or url.startswith(base + "/")


def _join(prefix: str, url: str, base: str) -> str:
    rest = url[len(base.rstrip("/")) :]
    return prefix.rstrip("/") + rest


@dataclass(frozen=True)
class Mirror:
    """One configured mirror: a canonical URL prefix, the prefix to fetch it from instead,
    and where that was configured."""

    canonical: str  # a URL prefix, as the lock holds it
    mirror: str  # the prefix to fetch it from instead (may carry its own credentials)
    source: str  # where it was configured: a file, or GPUENV_MIRRORS


@dataclass(frozen=True)
class Mirrors:
    """URL prefix rewrites, most specific (longest) prefix first."""

    entries: tuple[Mirror, ...] = ()

    def fetch_url(self, url: str) -> str:
        """The URL to fetch ``url`` (canonical) from: through the mirror of the longest
        matching canonical prefix, else ``url`` itself."""
        for entry in sorted(self.entries, key=lambda e: -len(e.canonical)):
            if _under(url, entry.canonical):
                return _join(entry.mirror, url, entry.canonical)
        return url

    def canonical_url(self, url: str) -> str:
        """``url`` as the lock keeps it: a URL under a mirror's prefix mapped back to
        the canonical prefix (the inverse of ``fetch_url``), else ``url`` itself."""
        plain = strip_userinfo(url)
        for entry in sorted(self.entries, key=lambda e: -len(strip_userinfo(e.mirror))):
            mirror = strip_userinfo(entry.mirror)
            if _under(plain, mirror):
                return _join(entry.canonical, plain, mirror)
        return url

    def is_mirror_url(self, url: str) -> bool:
        return any(_under(strip_userinfo(url), strip_userinfo(e.mirror)) for e in self.entries)

    def indexes(self) -> tuple[Index, ...]:
        """The mirrors as uv indexes (``gpuenv-mirror-N``), for their credentials."""
        return tuple(
            Index.parse(f"gpuenv-mirror-{i}", entry.mirror)
            for i, entry in enumerate(self.entries, 1)
        )

    def same_place(self, indexes: Iterable[Index]) -> list[tuple[str, str]]:
        """(index name, mirror name) for each index that is a mirror's canonical prefix
        (an install's) or lies under the mirror (a lock's, already rewritten): the
        credentials given by either name are the same server's."""
        pairs = []
        for index in indexes:
            plain = strip_userinfo(index.url)
            for number, entry in enumerate(self.entries, 1):
                name = f"gpuenv-mirror-{number}"
                near = _under(plain, strip_userinfo(entry.mirror)) or _under(plain, entry.canonical)
                if near and index.name != name:
                    pairs.append((index.name, name))
        return pairs

    def mirror_index(self, url: str) -> Index | None:
        """The mirror (as ``indexes`` names it) that ``url`` is fetched through, if any:
        the longest mirror prefix it lies under."""
        plain = strip_userinfo(url)
        under = [i for i in self.indexes() if _under(plain, i.url)]
        return max(under, key=lambda i: len(i.url), default=None)


def user_config(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/gpuenv/config.toml`` (default ``~/.config/gpuenv/config.toml``)."""
    xdg = environ.get("XDG_CONFIG_HOME", "").strip()
    from gpuenv._home import home_dir

    base = Path(xdg) if xdg else Path(home_dir(environ)) / ".config"
    return base / "gpuenv" / "config.toml"


def load_mirrors(environ: Mapping[str, str], *, site: Path = SITE_CONFIG) -> Mirrors:
    """Mirrors from ``GPUENV_MIRRORS``, then the user's config file, then the site's
    (``/etc/gpuenv/config.toml``); for one canonical prefix the first of these wins."""
    found: dict[str, Mirror] = {}
    sources = [
        _from_variable(environ.get("GPUENV_MIRRORS", "")),
        _from_file(user_config(environ)),
        _from_file(site),
    ]
    for entries in sources:
        for entry in entries:
            found.setdefault(entry.canonical.rstrip("/"), entry)
    return Mirrors(tuple(found.values()))


def _from_variable(value: str) -> list[Mirror]:
    out = []
    for item in re.split(r"[\s;]+", value.strip()):
        if not item:
            continue
        match = _PAIR.match(item)
        if match is None or not all(map(is_fetchable_url, (match["canonical"], match["mirror"]))):
            raise UsageError(
                f"GPUENV_MIRRORS: {redact(item)!r} is not CANONICAL=MIRROR (two URLs)",
                hint="GPUENV_MIRRORS='https://download.pytorch.org/whl=https://mirror.example/whl'",
            )
        out.append(Mirror(match["canonical"], match["mirror"], "GPUENV_MIRRORS"))
    return out


def _from_file(path: Path) -> list[Mirror]:
    """The ``[mirrors]`` table of a config file (absent file: none)."""
    import stat

    try:
        info = path.stat()
    except OSError:
        return []
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_CONFIG_BYTES:
        raise UsageError(f"{path}: not a regular file of at most 1 MiB")
    from gpuenv import _fsread, _toml

    try:  # the bounded reader: a file swapped for a FIFO after the stat never hangs
        data = _toml.loads(_fsread.read_text(path, limit=_MAX_CONFIG_BYTES, what="config file"))
    except RecursionError:  # tomllib recurses per nesting level
        raise UsageError(f"{path}: nested too deeply to be a gpuenv config file") from None
    except UsageError as exc:  # InputFileError: not a plain UTF-8 file
        raise UsageError(exc.message) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot be read as TOML: {redact(str(exc))}") from None
    unknown = sorted(set(data) - {"mirrors"})
    if unknown:
        raise UsageError(f"{path}: unknown key {unknown[0]!r} (known: mirrors)")
    table = data.get("mirrors", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: mirrors must be a table of URL = URL")
    out = []
    for canonical, mirror in table.items():
        if not isinstance(mirror, str) or not all(map(is_fetchable_url, (canonical, mirror))):
            raise UsageError(
                f"{path}: mirrors.{redact(canonical)!r}: expected a URL = URL pair "
                f"(got {redact(str(mirror))!r})"
            )
        out.append(Mirror(canonical, mirror, str(path)))
    return out


# --- what went wrong ------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A network failure read from a tool's error text."""

    cause: str  # "dns", "refused", "timeout", "tls", "auth", "not-found", "connection"
    url: str | None  # the URL it concerns (redacted), when the text names one
    detail: str  # the tool's own innermost words, one line
    packages: tuple[str, ...] = ()  # for "not-found": the names the index had no page for


CAUSES = {
    "dns": "the host name does not resolve",
    "refused": "the connection was refused",
    "timeout": "the connection timed out",
    "tls": "the TLS certificate was not accepted",
    "auth": "the server refused the credentials (401/403)",
    "not-found": "the index answered 404",
    "connection": "the connection failed",
}


def index_of(url: str | None, indexes: Iterable[Index]) -> Index | None:
    """The index ``url`` lies under (the longest match), if any."""
    if not url:
        return None
    plain = redact_url(url)
    matches = [i for i in indexes if _under(plain, i.shown.split("?", 1)[0])]
    root = [i for i in indexes if _under(plain, _root(i.shown))]
    return max(matches or root, key=lambda i: len(i.shown), default=None)


def _root(url: str) -> str:
    """uv's credential scope of an index: its URL without a trailing ``/simple``."""
    base = url.split("?", 1)[0].rstrip("/")
    return base[: -len("/simple")] if base.endswith("/simple") else base


def cause_hint(cause: str, index: Index | None) -> str:
    """What to do about a failure of this kind, for this index."""
    name = env_key(index.name) if index else "GPUENV_DEFAULT"
    hints = {
        "dns": "check the URL, this machine's DNS, or a proxy (HTTPS_PROXY, NO_PROXY)",
        "refused": "check the URL and port, or a proxy (HTTPS_PROXY, NO_PROXY)",
        "timeout": "check the network or proxy (HTTPS_PROXY); a slow link: raise UV_HTTP_TIMEOUT",
        "connection": "check the network or proxy (HTTPS_PROXY, NO_PROXY)",
        "tls": "behind a TLS-intercepting proxy or a private CA, set SSL_CERT_FILE (or "
        "SSL_CERT_DIR) to its certificates, or UV_SYSTEM_CERTS=1 to trust the system's",
        "auth": "pass credentials: in the URL (USER:TOKEN@ before the host), as "
        f"UV_INDEX_{name}_USERNAME and UV_INDEX_{name}_PASSWORD, in ~/.netrc (or $NETRC), "
        "or through keyring (UV_KEYRING_PROVIDER=subprocess)",
        "not-found": "check the package name; a mirror must keep the index's layout",
    }
    return hints.get(cause, hints["connection"])


def index_role(index: Index | None) -> str:
    """How messages name an index: by what it is for."""
    if index is None:
        return "the index"
    if index.name == TORCH_INDEX_NAME:
        return "the torch index"
    if index.name == DEFAULT_INDEX_NAME:
        return "the default index"
    if index.name.startswith("gpuenv-mirror-"):
        return "the mirror"
    return f"extra index {index.name.rsplit('-', 1)[-1]}"


def _role_hint(index: Index | None) -> str | None:
    if index is None:
        return None
    if index.name == TORCH_INDEX_NAME:
        return (
            "or take the torch builds from elsewhere: [pip] torch-index or GPUENV_TORCH_INDEX "
            "(layout <base>/<cu tag>/<package>/), or a mirror (GPUENV_MIRRORS)"
        )
    if index.name == DEFAULT_INDEX_NAME:
        return "or use another index: [pip] index-url or GPUENV_INDEX_URL, or a mirror"
    return None


# The proxy variables uv (reqwest) and rattler read, by the scheme of the URL fetched,
# in the order they are looked up.
_PROXY_VARIABLES = {
    "https": ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"),
    "http": ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"),
}


def proxy_for(url: str, environ: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, proxy URL) of the proxy a request for ``url`` goes through, as uv
    reads the environment (``NO_PROXY``/``no_proxy`` honoured); None: a direct one."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host or _bypassed(host, environ.get("NO_PROXY") or environ.get("no_proxy") or ""):
        return None
    for name in _PROXY_VARIABLES.get(parts.scheme.lower(), ()):
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def _bypassed(host: str, no_proxy: str) -> bool:
    import ipaddress

    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return True
        if not entry:
            continue
        try:
            if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                return True
            continue
        except ValueError:
            pass
        name = entry.lstrip(".")
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name  # host:port
        if host == name or host.endswith("." + name):
            return True
    return False


# What the tool says when the proxy itself failed (reqwest's CONNECT, a SOCKS proxy).
_THROUGH_PROXY = re.compile(r"tunnel error|SOCKS error", re.IGNORECASE)


def _proxy_failure(
    failure: Failure, url: str | None, stderr_tail: str, environ: Mapping[str, str]
) -> tuple[str, str, dict[str, str]] | None:
    """(what failed, hint, the proxy for --json) when ``failure`` is the proxy's: a refused
    connection or a host name that does not resolve is the proxy's whenever one is set
    for the URL (the client connects to the proxy only), any failure the tool calls a
    tunnel or SOCKS error is too. The proxy's URL is shown redacted."""
    found = proxy_for(url, environ) if url else None
    if found is None:
        return None
    variable, proxy = found
    tunnel = bool(_THROUGH_PROXY.search(f"{stderr_tail}\n{failure.detail}"))
    if failure.cause not in ("refused", "dns") and not tunnel:
        return None
    shown = f"the proxy {redact_url(proxy)} (from {variable})"
    what = {
        "refused": f"{shown} refused the connection",
        "dns": f"{shown} could not be reached: its host name does not resolve",
        "timeout": f"{shown} could not be reached: the connection timed out",
    }.get(failure.cause, f"{shown} could not connect to it")
    hint = (
        f"check the proxy {variable} names (its host and port), or unset it; "
        "let hosts that need no proxy bypass it: NO_PROXY"
    )
    return what, hint, {"variable": variable, "url": redact_url(proxy)}


def network_error(
    failure: Failure,
    *,
    index: Index | None,
    role: str | None = None,
    url: str | None = None,
    mirrors: Mirrors | None = None,
    extra_hint: str | None = None,
    stderr_tail: str = "",
    argv: Iterable[str] = (),
) -> NetworkError:
    """A ``NetworkError`` for ``failure``: the index by role, the URL (redacted), the
    tool's own words, and the fixes that fit; the proxy (``HTTPS_PROXY`` & co., as the
    tool read them), when it is the proxy that failed."""
    from gpuenv.errors import NetworkError

    shown = redact_url(url or failure.url or (index.shown if index else "")) or None
    where = (role or index_role(index)) + (f" {shown}" if shown else "")
    if mirrors is not None and shown and mirrors.is_mirror_url(shown):
        entry = next(e for e in mirrors.entries if _under(shown, strip_userinfo(e.mirror)))
        where += f" (a mirror of {redact_url(entry.canonical)}, from {entry.source})"
    proxy = _proxy_failure(failure, shown, stderr_tail, os.environ)
    if proxy is not None:
        what = f"cannot be used: {proxy[0]} ({failure.detail})"
    elif failure.cause == "not-found" and failure.packages:
        what = f"has no {', '.join(failure.packages)} (404)"
    elif failure.cause == "auth" and failure.detail.startswith("HTTP 40"):
        what = f"cannot be used: the server refused the credentials ({failure.detail})"
    else:
        what = f"cannot be used: {CAUSES[failure.cause]} ({failure.detail})"
    mirror = mirrors.mirror_index(index.url) if mirrors is not None and index else None
    hint = cause_hint(failure.cause, index)
    if mirror is not None and failure.cause == "auth":  # the name the docs give a mirror
        hint = cause_hint(failure.cause, mirror)
    if role is not None and failure.cause == "auth":  # not a pip index: no UV_INDEX_* names
        hint = "pass credentials in the channel URL (USER:TOKEN@ before the host)"
    hints = [extra_hint, proxy[1], None] if proxy else [extra_hint, hint, _role_hint(index)]
    error = NetworkError(
        f"{where} {what}",
        cause=failure.cause,
        url=shown,
        hint="; ".join(h for h in hints if h),
        stderr_tail=stderr_tail,
        extra={"proxy": proxy[2]} if proxy else None,
    )
    error.argv = tuple(argv)
    return error
