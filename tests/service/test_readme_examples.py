"""The README's ``curl`` examples run, so an example that drifts from the service fails here.

* Every request to ``/v1/<task>/predict`` (each ``curl ... -d '<JSON>'``) is a valid body of the named
  task's route.
* Every ``curl`` of a fenced ``bash`` block that targets the service (``127.0.0.1:8000``) is sent as
  its shell would send it (method, path and query, headers, body; the key it reads with
  ``$(cat "${PREFLIGHT_HOME:-.preflight}/api-key")`` is the one the service generated in its home) to
  the app of ``create_app`` on a private copy of the ``trained_home`` champions. It answers 2xx and,
  where the README shows the answer right after it (``#`` lines: a status code, then a JSON object in
  which ``...`` and ``"…"`` stand for what is left out), that status, that object's keys (exactly, at
  the answer's top level, unless ``...``), the type of each value and the texts it quotes.
* The figures the README quotes (and the verdicts: ``ood``, ``warnings``, ``decision``) are a fresh
  clone's: champions trained on the embedded default, which ``trained_home``'s (``tests/samples.py``)
  are not. They are checked, within :data:`RELATIVE_TOLERANCE` or half a unit of the last digit the
  README prints, whichever is larger, on the champions of a fresh clone's first ``preflight serve``
  (``first_start``: its own process, the embedded default, no ``PREFLIGHT_DATASETS``).

The examples depend on one another (a device is registered before its measurements are taken back), so
each test replays the README's earlier requests that change state (those that send the API key), in
README order, before its own, on its own home.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient
from preflight.data.settings import Settings
from preflight.models.core.task import get_task
from preflight.service.app import create_app
from preflight.service.schemas import predict_request

README = Path(__file__).resolve().parents[2] / "README.md"
#: A curl to a task's predict route and its JSON body (``-d '...'``, single-quoted, over lines).
PREDICT_CURL = re.compile(r"curl [^\n]*?/v1/([\w-]+)/predict\b[^\n]*?-d '([^']*)'")
#: A fenced bash block of the README: its body.
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: The shell substitution by which the README's requests read the service's key (the path it reads is
#: the service's own, ``Settings().api_key_file``: ``test_api_key_path.py``).
KEY_FROM_HOME = '$(cat "${PREFLIGHT_HOME:-.preflight}/api-key")'
KEY_PLACEHOLDER = "<the key in PREFLIGHT_HOME/api-key>"
#: Where the README's examples find the service; other addresses are other servers.
SERVICE = "127.0.0.1:8000"
#: Why an example of another server cannot run here, by its address.
NOT_IN_PROCESS = {
    "127.0.0.1:5001": "MLflow's scoring server (`mlflow models serve`, a separate uvicorn process the "
    "example starts in the background), not preflight's app: it cannot run in-process",
}
#: How far a figure of a fresh clone's answer may be from the one the README quotes, besides the
#: README's rounding (half a unit of its last digit): retraining the embedded default on another
#: machine or thread count moves its figures by less (they were within the rounding on 2 cores).
RELATIVE_TOLERANCE = 0.01


# --- reading the README's curl examples -----------------------------------------------------------


@dataclass(frozen=True)
class Curl:
    """One ``curl`` of the README, as its shell would send it, and the answer the README shows after it."""

    line: int
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: str | None
    shown: str  # the ``#`` comment lines right after it, without the ``#``

    @property
    def address(self) -> str:
        return urlsplit(self.url).netloc

    @property
    def target(self) -> str:
        """The path and query."""
        parts = urlsplit(self.url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    @property
    def id(self) -> str:
        return (
            f"{self.method} {self.address if self.address != SERVICE else ''}{self.target} (line {self.line})"
        )

    @property
    def changes_state(self) -> bool:
        """Whether it sends the service's key: only routes that change state need one."""
        return any(name.lower() == "x-api-key" for name, _ in self.headers)

    def headers_with(self, key: str) -> dict[str, str]:
        return {name: value.replace(KEY_PLACEHOLDER, key) for name, value in self.headers}


def _command_at(block: str, start: int) -> tuple[str, int]:
    """The command that starts at ``start`` (its ``\\``-continued lines joined) and where it ends: at an
    unquoted newline or ``#``. Quotes are tracked so that a body may span lines."""
    text, quote, i = [], None, start
    while i < len(block):
        char = block[i]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "\\" and block[i + 1 : i + 2] == "\n":
            i += 2
            continue
        elif char == "\n" or (char == "#" and block[i - 1].isspace()):
            break
        elif char in ";&|<>`":
            raise ValueError(f"a curl example chains or redirects ({char!r}): {''.join(text)}")
        text.append(char)
        i += 1
    if quote:
        raise ValueError(f"a curl example leaves a {quote} quote open: {''.join(text)}")
    return "".join(text), i


def _comment_after(block: str, end: int) -> str:
    """The comment that ends the command's line and the ``#`` lines right after it, without the ``#``."""
    lines = block[end:].split("\n")
    shown = [lines[0].strip().removeprefix("#")] if lines[0].strip() else []
    for line in lines[1:]:
        if not line.lstrip().startswith("#"):
            break
        shown.append(line.lstrip().removeprefix("#"))
    return "\n".join(shown).strip()


def _curl(args: list[str], line: int, shown: str) -> Curl:
    """A curl command line's request; an option this reader does not know fails, rather than being
    sent otherwise than the README's reader would send it."""
    method, url, body, headers = None, None, None, []
    options = iter(args[1:])
    for arg in options:
        if arg in ("-s", "--silent", "-S", "--show-error"):
            continue
        if arg in ("-X", "--request"):
            method = next(options)
        elif arg in ("-H", "--header"):
            name, colon, value = next(options).partition(":")
            assert colon, f"README.md line {line}: a header without a colon: {name}"
            headers.append((name.strip(), value.strip()))
        elif arg in ("-d", "--data", "--data-raw", "--data-binary"):
            body = next(options)
        elif arg.startswith("-") or url is not None:
            raise ValueError(f"README.md line {line}: curl {arg!r} is not read by this test: teach it")
        else:
            url = arg if "://" in arg else f"http://{arg}"
    assert url, f"README.md line {line}: a curl without a URL"
    unexpanded = [arg for arg in args if "$" in arg]
    assert not unexpanded, f"README.md line {line}: a shell expansion this test cannot make: {unexpanded}"
    return Curl(line, method or ("POST" if body is not None else "GET"), url, tuple(headers), body, shown)


def readme_curls() -> list[Curl]:
    """Every ``curl`` of the README's bash blocks, in README order."""
    text = README.read_text(encoding="utf-8")
    curls = []
    for block in BASH_BLOCK.finditer(text):
        body = block.group(1).replace(KEY_FROM_HOME, KEY_PLACEHOLDER)
        first_line = text.count("\n", 0, block.start(1)) + 1
        for start in (m.start(1) for m in re.finditer(r"^[ \t]*(curl\s)", body, re.MULTILINE)):
            command, end = _command_at(body, start)
            line = first_line + body.count("\n", 0, start)
            curls.append(_curl(shlex.split(command), line, _comment_after(body, end)))
    return curls


CURLS = readme_curls()
SERVICE_CURLS = [curl for curl in CURLS if curl.address == SERVICE]


# --- reading the answers the README shows (JSON with ``...`` for what is left out) -----------------

#: ``...`` in an object or list of a shown answer: more keys or items than shown.
MORE = "..."
_TOKEN = re.compile(
    r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)'
    r"|(?P<literal>true|false|null)|(?P<more>\.\.\.|…)|(?P<punct>[{}\[\]:,]))"
)
_LITERALS = {"true": True, "false": False, "null": None}


@dataclass(frozen=True)
class Figure:
    """A number as the README prints it: its value and the half unit of its last digit."""

    value: float
    half_unit: float

    @classmethod
    def of(cls, text: str) -> Figure:
        mantissa = re.split("[eE]", text)[0]
        decimals = len(mantissa.partition(".")[2])
        exponent = int(text[len(mantissa) + 1 :]) if len(mantissa) < len(text) else 0
        return cls(float(text), 0.5 * 10.0 ** (exponent - decimals))

    def admits(self, value: float) -> bool:
        return math.isfinite(value) and abs(value - self.value) <= max(
            self.half_unit, RELATIVE_TOLERANCE * abs(self.value)
        )


def _shown_value(text: str, i: int) -> tuple[object, int]:
    """The value of a shown answer at ``text[i:]`` and where it ends. Objects are dicts (with key
    :data:`MORE` when keys are left out), lists keep :data:`MORE` where items are, numbers are
    :class:`Figure`, ``"…"`` is :data:`MORE`."""
    match = _TOKEN.match(text, i)
    if not match:
        raise ValueError(f"cannot read {text[i : i + 40]!r}")
    kind, token, i = match.lastgroup, match.group(match.lastgroup), match.end()
    if kind == "string":
        value = json.loads(token)
        return (MORE if value in ("…", MORE) else value), i
    if kind == "number":
        return Figure.of(token), i
    if kind == "literal":
        return _LITERALS[token], i
    if kind == "more":
        return MORE, i
    if token not in "{[":
        raise ValueError(f"unexpected {token!r} at {text[i - 1 : i + 40]!r}")
    closing, container = ("}", {}) if token == "{" else ("]", [])
    while True:
        end = _TOKEN.match(text, i)
        if end and end.group("punct") == closing:
            return container, end.end()
        if isinstance(container, dict):
            more = _TOKEN.match(text, i)
            if more and more.lastgroup == "more":
                container[MORE], i = True, more.end()
            else:
                key, i = _shown_value(text, i)
                colon = _TOKEN.match(text, i)
                if not isinstance(key, str) or not colon or colon.group("punct") != ":":
                    raise ValueError(f"expected a key and ':' at {text[i : i + 40]!r}")
                container[key], i = _shown_value(text, colon.end())
        else:
            item, i = _shown_value(text, i)
            container.append(item)
        separator = _TOKEN.match(text, i)
        if separator and separator.group("punct") == ",":
            i = separator.end()
        elif not (separator and separator.group("punct") == closing):
            raise ValueError(f"expected ',' or {closing!r} at {text[i : i + 40]!r}")


def shown_answer(shown: str) -> tuple[int | None, dict | None]:
    """The status code a shown answer starts with, and its first JSON object (later ones are asides,
    such as an answer before some change)."""
    status = re.match(r"(\d{3})\b", shown)
    brace = shown.find("{")
    answer = _shown_value(shown, brace)[0] if brace >= 0 else None
    return (int(status.group(1)) if status else None), answer


#: What the model concludes about an item besides its figures: checked with the figures, as they
#: come from the same champion.
VERDICTS = ("ood", "warnings", "decision")


def mismatches(shown: object, answer: object, where: str, exact_keys: bool, figures: bool) -> list[str]:
    """Where ``answer`` differs from what the README shows of it: its keys (``exact_keys``: an object
    shown without ``...`` has exactly the shown keys, else at least them), the type of each value
    shown, and the texts shown; with ``figures``, also the numbers (in texts too) and the
    :data:`VERDICTS`, which depend on what the champion learned."""
    if shown is MORE:
        return []
    if _kind(shown) != _kind(answer):
        return [f"{where}: README shows {_kind(shown)} {_plain(shown)!r}, the answer is {answer!r}"]
    if isinstance(shown, dict):
        keys = set(shown) - {MORE}
        found = [
            f"{where}: README shows key {key!r}, the answer has none" for key in sorted(keys - set(answer))
        ]
        if exact_keys and MORE not in shown and set(answer) != keys:
            found.append(f"{where}: README shows keys {sorted(keys)}, the answer has {sorted(answer)}")
        for key in sorted(keys & set(answer)):
            if key not in VERDICTS or figures:
                found += mismatches(shown[key], answer[key], f"{where}.{key}", False, figures)
            elif shown[key] is not MORE and _kind(shown[key]) != _kind(answer[key]):
                found.append(
                    f"{where}.{key}: README shows {_kind(shown[key])}, the answer is {answer[key]!r}"
                )
        return found
    if isinstance(shown, list):
        listed = shown[: shown.index(MORE)] if MORE in shown else shown
        if MORE not in shown and len(answer) != len(shown):
            return [f"{where}: README shows {_plain(shown)}, the answer is {answer!r}"]
        if len(answer) < len(listed):
            return [f"{where}: README shows {len(listed)}+ items, the answer has {len(answer)}"]
        return [
            m
            for i, item in enumerate(listed)
            for m in mismatches(item, answer[i], f"{where}[{i}]", False, figures)
        ]
    if isinstance(shown, Figure):
        if figures and not shown.admits(answer):
            return [f"{where}: README says {shown.value:g}, the answer is {answer!r}"]
        return []
    if isinstance(shown, str):
        if not _same_text(shown, answer, figures):
            return [f"{where}: README says {shown!r}, the answer is {answer!r}"]
        return []
    if shown != answer:
        return [f"{where}: README says {shown!r}, the answer is {answer!r}"]
    return []


def _kind(value: object) -> str:
    """A value's JSON type, as a word."""
    if isinstance(value, Figure) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return "number"
    return {dict: "object", list: "list", str: "text", bool: "boolean", type(None): "null"}[type(value)]


#: A number inside a text (``"P(final > incumbent) = 0.033 < risk 0.05"``).
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _same_text(shown: str, answer: str, figures: bool) -> bool:
    """Whether a text reads as the README shows it: the same words, and, where the README's ends in
    ``...``, only as far as that; with ``figures``, its numbers within the tolerance."""
    prefix = shown.endswith((MORE, "…"))
    shown = shown.removesuffix(MORE).removesuffix("…")
    words, numbers = _NUMBER.split(shown), _NUMBER.findall(shown)
    pattern = "".join(
        re.escape(word) + (f"({_NUMBER.pattern})" if i < len(numbers) else "") for i, word in enumerate(words)
    )
    match = (re.match if prefix else re.fullmatch)(pattern, answer)
    return bool(match) and (
        not figures
        or all(Figure.of(number).admits(float(found)) for number, found in zip(numbers, match.groups()))
    )


def _plain(shown: object) -> object:
    """A shown value as the README prints it, for messages."""
    if isinstance(shown, Figure):
        return shown.value
    if isinstance(shown, list):
        return [_plain(item) for item in shown]
    if isinstance(shown, dict):
        return {key: _plain(value) for key, value in shown.items()}
    return shown


def located(shown: dict, answer: dict) -> tuple[str, object, bool]:
    """Where in the answer the README's object belongs: the answer itself (its keys exactly, unless
    ``...``) or, when the README shows one prediction (keys the answer's items have), its first item."""
    keys = set(shown) - {MORE}
    items = answer.get("predictions")
    if not keys <= set(answer) and isinstance(items, list) and items and keys <= set(items[0]):
        return "answer.predictions[0]", items[0], False
    return "answer", answer, True


# --- the tests ------------------------------------------------------------------------------------


def predict_bodies() -> list[tuple[str, str]]:
    """``(task, body)`` of every predict request in the README, in its order."""
    return PREDICT_CURL.findall(README.read_text(encoding="utf-8"))


def test_the_readme_shows_predict_requests():
    assert predict_bodies(), f"no curl to /v1/<task>/predict found in {README}"


@pytest.mark.parametrize(
    ("task", "body"), [pytest.param(*request, id=request[0]) for request in predict_bodies()]
)
def test_a_readme_predict_request_is_valid_for_its_task(task, body, settings):
    request = predict_request(get_task(task))
    request.model_validate(json.loads(body), context=settings.validation_context())


def test_every_readme_curl_is_read():
    """Each ``curl`` of the README's bash blocks is one this module reads, to the service or to a
    server :data:`NOT_IN_PROCESS` names."""
    text = README.read_text(encoding="utf-8")
    in_blocks = sum(
        len(re.findall(r"^\s*curl\s", b.group(1), re.MULTILINE)) for b in BASH_BLOCK.finditer(text)
    )
    assert len(CURLS) == in_blocks and len(SERVICE_CURLS) >= 5, [curl.id for curl in CURLS]
    for curl in CURLS:
        assert curl.address == SERVICE or curl.address in NOT_IN_PROCESS, (
            f"{curl.id}: where is {curl.address}?"
        )


def curl_params(curls: list[Curl]) -> list:
    """The examples as parameters, those of another server skipped with the reason."""
    return [
        pytest.param(curl, id=curl.id)
        if curl.address == SERVICE
        else pytest.param(curl, id=curl.id, marks=pytest.mark.skip(reason=NOT_IN_PROCESS[curl.address]))
        for curl in curls
    ]


def run_in_order(curl: Curl, home: Path):
    """The service's answer to ``curl`` on ``home``, after the README's earlier examples that change
    state (those that send the key), which must succeed. The key is the one the service generated in
    ``home`` at start, as ``$(cat "${PREFLIGHT_HOME:-.preflight}/api-key")`` reads it."""
    app = create_app(Settings(home=home, datasets=None, api_keys=[], reload_interval_s=0))
    with TestClient(app) as client:
        key = Settings(home=home).api_key_file.read_text().strip()
        for earlier in SERVICE_CURLS[: SERVICE_CURLS.index(curl)]:
            if earlier.changes_state:
                before = send(client, earlier, key)
                assert before.is_success, f"{earlier.id}, replayed before {curl.id}: {before.text}"
        return send(client, curl, key)


def send(client: TestClient, curl: Curl, key: str):
    """The request as curl sends it (``-d`` without a content type is a form, as curl says)."""
    headers = curl.headers_with(key)
    if curl.body is not None and not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    body = None if curl.body is None else curl.body.encode()
    return client.request(curl.method, curl.target, headers=headers, content=body)


def check_answer(curl: Curl, response, figures: bool) -> None:
    """2xx, the status the README shows, and the answer as the README shows it."""
    status, shown = shown_answer(curl.shown)
    where = f"README.md line {curl.line}, {curl.id}"
    assert response.is_success, f"{where}: answered {response.status_code}: {response.text}"
    assert status in (None, response.status_code), f"{where}: README shows {status}: {response.text}"
    if shown is not None:
        answer = response.json()
        part, found_at, exact = located(shown, answer)
        found = mismatches(shown, found_at, part, exact_keys=exact, figures=figures)
        assert not found, f"{where}:\n" + "\n".join(found) + f"\nthe answer: {json.dumps(answer)}"


@pytest.mark.parametrize("curl", curl_params(CURLS))
def test_a_readme_curl_runs_and_answers_as_shown(curl, home):
    """On the ``trained_home`` champions, which learned from ``tests/samples.py`` rather than the
    embedded default the README's figures come from: the status, keys, types and texts shown."""
    shown_answer(curl.shown)  # a README answer this module cannot read fails first
    check_answer(curl, run_in_order(curl, home), figures=False)


@pytest.mark.parametrize("curl", curl_params([curl for curl in CURLS if re.search(r"\d", curl.shown)]))
def test_a_readme_curl_quotes_a_fresh_clones_figures(curl, fresh_clone_home):
    """On a fresh clone's champions: the figures and verdicts the README quotes, too."""
    check_answer(curl, run_in_order(curl, fresh_clone_home), figures=True)
