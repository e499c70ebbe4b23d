"""``python -m app demo``: every scenario runs to the end as a real subprocess, quickly, and says
what happened; the ``--html`` page renders in headless Chromium and shows the conversation."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.store import decompress_payload

ROOT = Path(__file__).resolve().parent.parent
BOT = "revbot[bot]"
DECOY_CLEANUP = "app.handlers.decoy.on_own_review_submitted"
CHROMIUM = "/usr/bin/chromium"
# One worker runs the module (pytest-xdist): each demo run is made once and shared by its tests.
pytestmark = pytest.mark.xdist_group("demo")

# Each run: (id, extra arguments). The default story also writes the HTML page.
RUNS = {
    "story": ["--html", "{tmp}/pr.html"],
    "no-approve": ["--no-approve"],
    "mention": ["--scenario", "mention"],
    "big-pr": ["--scenario", "big-pr"],
    "redelivery": ["--scenario", "redelivery"],
    "crash-recovery": ["--scenario", "crash-recovery"],
    "ready": ["--scenario", "ready", "--html", "{tmp}/ready.html"],
}

# Lines (regular expressions) each run must print.
EXPECTED = {
    "story": [
        r"alice +requested a review from revbot \(requested reviewers: revbot\)",
        r"revbot\[bot\] +submitted a review: CHANGES REQUESTED at \w{7} with 7 inline comment\(s\)",
        r"- src/app\.py:5\n +\*\*blocker\*\* · `python/F821` · Undefined name `render`",
        r"- deploy/key\.pem:1\n +\*\*blocker\*\* · `secrets/private-key`",
        r"- src/parser\.py:3\n +\*\*blocker\*\* · `python/syntax-error`",
        r"- README\.md:4\n +\*\*blocker\*\* · `conflict-marker`",
        r"- src/app\.py:9\n +\*\*concern\*\* · `debug/breakpoint`",
        r"revbot\[bot\] +removed revbot from the requested reviewers",
        r"review decision CHANGES_REQUESTED; requested reviewers: nobody; threads resolved 0/7",
        r'alice +replied "fixed" in the thread on src/app\.py:5',
        r"revbot\[bot\] +resolved the thread on src/app\.py:5",
        r"revbot\[bot\] +replied in the thread on src/app\.py:9:\n"
        r" +\| Still there at \w{12}: `debug/breakpoint`",
        r"revbot\[bot\] +submitted a review: APPROVED at \w{7}\n",
        r"\*\*Verified fixed\*\*",
        r"review decision APPROVED; requested reviewers: nobody; threads resolved 7/7; "
        r'checks: "revbot review" success',
    ],
    "no-approve": [
        r"revbot\[bot\] +submitted a review: CHANGES REQUESTED",
        r"revbot\[bot\] +resolved the thread on src/app\.py:5",
        r"revbot\[bot\] +dismissed its own review \d+: The blockers of this review are verified fixed",
        r"revbot\[bot\] +submitted a review: COMMENTED at \w{7}\n",
        r"I dismissed my request for changes",
        r"review decision none; requested reviewers: nobody; threads resolved 7/7",
    ],
    "mention": [
        r'alice +commented "@revbot review"',
        r"revbot\[bot\] +reacted :eyes: to alice's comment",
        r"revbot\[bot\] +submitted a review: CHANGES REQUESTED",
        r"revbot\[bot\] +commented on PR #1:\n +\| @mallory thanks for asking",
        r'mallory +commented "@revbot review please!!".*\n.*delivered issue_comment.created.*\n'
        r".*revbot\[bot\] +made no write",
        r"refusals posted to mallory: 1 ",
        r"revbot\[bot\] +commented on PR #1:\n +\| Commands \(mention me",
        r"reviews posted: 1 ",
    ],
    "big-pr": [
        r"revbot\[bot\] +submitted a review: CHANGES REQUESTED at \w{7} with 1 inline comment\(s\)",
        r"- pkg/mod_240\.py:1",
        r"API calls for the review: \d+ \(.*\); file list pages read: 3",
        r"time from the request to the bot settling: \d+\.\d\ds",
    ],
    "redelivery": [
        r"GitHub +redelivers issue_comment\.created with the same delivery id",
        r"first delivery answered 202, the redelivery answered 200",
        r"writes by the bot after the redelivery: 0",
        r"status: done\n +attempts: 1",
        r"ledger rows with this delivery id: 1; reviews posted: 1",
    ],
    "crash-recovery": [
        r"worker process 1 killed with SIGKILL mid-review",
        r"job 1: still running under the dead worker's lease",
        r"worker process 2 claimed job 1 after the lease expired: attempt 2",
        r"revbot\[bot\] +submitted a review: CHANGES REQUESTED",
        r"job 1: status done, attempts 2",
        r"reviews posted: 1; check runs for the head: 1; reactions on the PR: 1",
    ],
    "ready": [
        # The conversation hears only what someone must act on (issue 29); the check run all of it.
        r"readiness check run \(no comment: nobody needs to act\): ⛔ Blocked — changes requested by "
        r"`revbot\[bot\]`",
        r"readiness check run \(no comment: nobody needs to act\): ⏳ Waiting — check\(s\) still running: "
        r"`lint`, `tests`",
        r"readiness check run and comment: ⛔ Blocked — failing check\(s\): `tests`",
        r"readiness check run \(no comment: nobody needs to act\): ⏳ Waiting — a quiet window of 3 s",
        r"readiness check run and comment: ✅ Looks merge-ready — 2 check\(s\) passed, approved by "
        r"`revbot\[bot\]`, no unresolved threads, quiet for 3 s or more\. Your call to merge\.",
        r'check run "revbot readiness": success; nothing merged',
    ],
}
# Handlers that run for the bot's own events: the decoy cleanup, and readiness for its own reviews
# and thread resolutions (they change the answer; they only ask for a later look, never write).
OWN_EVENT_HANDLERS = {
    DECOY_CLEANUP,
    "app.handlers.readiness.on_review",
    "app.handlers.readiness.on_thread",
}


@dataclass
class Run:
    name: str
    returncode: int
    stdout: str
    stderr: str
    tmp: Path

    @property
    def workdir(self) -> Path:
        found = re.search(r"^temp dir: (\S+) \(kept\)$", self.stdout, re.MULTILINE)
        assert found, self.stdout
        return Path(found.group(1))


def run_demo(name: str, tmp: Path) -> Run:
    args = [a.format(tmp=tmp) for a in RUNS[name]]
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "app", "demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Run(name, done.returncode, done.stdout, done.stderr, tmp)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """Each run at most once per module, when a test first asks for it."""
    cache: dict[str, Run] = {}

    def get(name: str) -> Run:
        if name not in cache:
            cache[name] = run_demo(name, tmp_path_factory.mktemp(name))
        return cache[name]

    return get


def own_event_rows(database: Path) -> list[tuple[str, str, str, list[str]]]:
    """(event.action, status, delivery id, handlers run) of every ledger row whose sender is the bot,
    read straight from the SQLite file (the payload column is compressed JSON)."""
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT event, action, status, delivery_id, done_handlers, payload FROM deliveries ORDER BY id"
        ).fetchall()
    out = []
    for event, action, status, delivery_id, handlers, payload in rows:
        sender = (json.loads(decompress_payload(payload)).get("sender") or {}).get("login")
        if sender == BOT:
            out.append((f"{event}.{action}", status, delivery_id, json.loads(handlers)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RUNS))
def test_each_scenario_runs_to_the_end_and_tells_what_happened(name: str, demo: Callable[[str], Run]) -> None:
    run = demo(name)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "\033[" not in run.stdout, "colours although stdout is not a terminal"
    for pattern in EXPECTED[name]:
        assert re.search(pattern, run.stdout), f"missing {pattern!r} in:\n{run.stdout}"
    assert "<!-- revbot:" not in run.stdout, "hidden markers are shown"
    # Every write of the bot is told in words, never as a raw request line.
    raw = r"(?m)^ +\d+\.\d\ds  revbot\[bot\] +(GET|POST|PATCH|PUT|DELETE) /"
    assert not re.search(raw, run.stdout), run.stdout
    # Every line of the timeline: elapsed seconds, who, what.
    for line in run.stdout.splitlines():
        if re.match(r"^ +\d+\.\d\ds  ", line):
            assert re.match(r"^ +\d+\.\d\ds  (alice|mallory|GitHub|revbot\[bot\]|demo) +\S", line), line

    # The closing lines: where the database and the logs are, and that they are there.
    workdir = run.workdir
    assert workdir.is_dir() and workdir.parent == run.tmp
    database = workdir / "revbot.sqlite3"
    assert f"database: {database}" in run.stdout and database.is_file()
    log = workdir / "revbot.log"
    assert f"logs:     {log} (JSON lines)" in run.stdout
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(e.get("msg", "").startswith("running as revbot[bot]") for e in entries)
    if name == "crash-recovery":
        assert (workdir / "worker-1.log").is_file() and (workdir / "worker-2.log").is_file()

    # The echo line is measured: it matches the ledger, read here independently.
    own = own_event_rows(database)
    echo = re.search(
        r"echo: (\d+) webhook\(s\) had revbot\[bot\] as sender \(the bot answered (\d+)x 202\); "
        r"(\d+) woke nothing, (\d+) ran a handler",
        run.stdout,
    )
    assert echo, run.stdout
    total, answered, silent, acting = map(int, echo.groups())
    assert total == answered == len(own) > 0
    assert all(status == "done" for _, status, _, _ in own)
    assert silent == sum(1 for *_, handlers in own if not handlers)
    assert acting == len(own) - silent
    # The only handlers that ever run for the bot's own events are the decoy cleanup, whose only
    # write is removing the decoy, and readiness asking for a later look (no write).
    assert {h for *_, handlers in own for h in handlers} <= OWN_EVENT_HANDLERS
    for line in re.findall(r"^ +pull_request_review\.submitted \w{8}: .*$", run.stdout, re.MULTILINE):
        assert line.endswith(("-> DELETE /repos/octo/widgets/pulls/1/requested_reviewers", "-> no write"))
    assert "by any other echo: 0)" in run.stdout


# ------------------------------------------------------------------------------ the HTML page
def png_colours(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct colours) of an 8-bit RGB/RGBA, non-interlaced PNG, decoded here:
    the IDAT stream inflated with zlib and each scanline's filter undone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, [], None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        chunk = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and interlace == 0 and colour_type in (2, 6), header
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    previous = bytes(stride)
    colours: set[bytes] = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:  # Sub
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        else:
            assert kind == 0, f"unknown PNG filter {kind}"
        previous = bytes(line)
        colours.update(previous[i : i + bpp] for i in range(0, stride, bpp))
    return width, height, len(colours)


def test_png_decoder_counts_colours() -> None:
    def png(width: int, height: int, rows: list[bytes]) -> bytes:
        def chunk(kind: bytes, body: bytes) -> bytes:
            return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))

    white = b"\x00" + b"\xff" * 6
    assert png_colours(png(2, 2, [white, white])) == (2, 2, 1)
    # Sub: second pixel = first + (1, 2, 3); Up: the row above + (0, 0, 16)
    rows = [b"\x01" + bytes([10, 20, 30, 1, 2, 3]), b"\x02" + bytes([0, 0, 16, 0, 0, 16])]
    assert png_colours(png(2, 2, rows)) == (2, 2, 4)


def chromium() -> str:
    found = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs the Debian package chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def headless(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{time.monotonic_ns()}"
    profile.mkdir()
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.slow
def test_the_html_page_renders_the_conversation_in_chromium(
    demo: Callable[[str], Run], tmp_path: Path
) -> None:
    binary = chromium()
    run = demo("story")
    assert run.returncode == 0, run.stdout + run.stderr
    page = run.tmp / "pr.html"
    assert f"html:     {page}" in run.stdout
    source = page.read_text(encoding="utf-8")
    # Self-contained: no scripts, nothing fetched from anywhere.
    assert "<script" not in source.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", source, re.IGNORECASE)
    assert "@import" not in source and "url(" not in source
    assert "<!-- revbot:" not in source

    url = page.as_uri()
    png = tmp_path / "pr.png"
    shot = headless(binary, tmp_path, f"--screenshot={png}", "--window-size=1200,2000", url)
    assert png.is_file(), shot.stderr
    width, height, colours = png_colours(png.read_bytes())
    assert (width, height) == (1200, 2000)
    assert colours > 50, f"the screenshot looks blank ({colours} colours)"

    dom = headless(binary, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom.stdout))
    assert "Add the request handler" in text
    assert "revbot[bot] requested changes Changes requested" in text
    assert "revbot[bot] approved these changes Approved" in text
    assert "Review decision: Approved" in text
    assert "Conversations: 7 of 7 resolved" in text
    # Resolved threads are collapsed, each with its code and the conversation in it.
    resolved = re.findall(r'<details class="thread resolved">(.*?)</details>', dom.stdout, re.DOTALL)
    assert len(resolved) == 7
    [breakpoint_thread] = [t for t in resolved if "src/app.py:9" in t]
    assert "resolved by revbot[bot]" in breakpoint_thread
    assert "breakpoint()" in breakpoint_thread and 'class="code"' in breakpoint_thread
    assert "Still there at" in breakpoint_thread and "fixed" in breakpoint_thread


def test_the_html_page_escapes_what_the_pull_request_says() -> None:
    from app.demo.html import markdown

    hostile = (
        "<img src=x onerror=alert(1)> **bold** `<b>code</b>` [x](javascript:alert(1)) "
        '<!-- revbot:note {"a":1} -->'
    )
    rendered = markdown(hostile)
    assert "<img" not in rendered and "javascript:" not in rendered and "<b>code" not in rendered
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert "<strong>bold</strong>" in rendered and "<code>&lt;b&gt;code&lt;/b&gt;</code>" in rendered
    assert "revbot:note" not in rendered


@pytest.mark.slow
def test_the_ready_page_shows_the_readiness_comment_and_check(demo: Callable[[str], Run]) -> None:
    run = demo("ready")
    assert run.returncode == 0, run.stdout + run.stderr
    source = (run.tmp / "ready.html").read_text(encoding="utf-8")
    assert "✅ Looks merge-ready — 2 check(s) passed" in source
    assert "What I saw on this pull request" in source and "CI failures seen:" in source
    assert 'revbot readiness: <span class="ok">success</span>' in source
    assert "<!-- revbot:" not in source


@pytest.mark.slow
def test_the_cli_offers_every_scenario_and_the_tests_play_each() -> None:
    from app.demo import SCENARIOS

    shown = subprocess.run(
        [sys.executable, "-m", "app", "demo", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert "{" + ",".join(SCENARIOS) + "}" in re.sub(r"\s+", "", shown)
    played = {args[args.index("--scenario") + 1] for args in RUNS.values() if "--scenario" in args}
    assert played | {"story"} == set(SCENARIOS)


def test_production_code_never_imports_the_demo() -> None:
    for path in (ROOT / "app").rglob("*.py"):
        relative = path.relative_to(ROOT / "app")
        if relative.parts[0] in ("demo", "sandbox", "replay"):  # replay plays the bot on the demo's stage
            continue
        text = path.read_text(encoding="utf-8")
        imports = re.findall(r"^\s*(?:from|import)\s+(\S+)", text, re.MULTILINE)
        demo_imports = [name for name in imports if re.fullmatch(r"(app\.|\.+)(demo|replay)(\..*)?", name)]
        if relative == Path("cli/play.py"):
            # Only inside the ``demo`` and ``replay`` commands, imported when that command runs.
            assert re.search(r"def _demo\(.*\n    from \.\.demo import", text)
            assert re.search(r"def _replay\(.*\n    from \.\.replay import", text)
            assert len(demo_imports) == 2
        else:
            assert demo_imports == [], relative
