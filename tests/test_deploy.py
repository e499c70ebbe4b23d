"""The deploy files (Dockerfile, fly.toml, app.json, requirements.txt, .env.example) say what the
bot needs, parsed the way each platform reads them; and the settings they rely on work:
``sslmode`` URLs, the pool size, the shutdown budget, the Heroku SQLite refusal, ``.env``."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path
from types import ModuleType

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from sqlalchemy import text

from app.review.llm.providers import make_provider
from app.settings.config import (
    DEFAULT_SHUTDOWN_SECONDS,
    ConfigError,
    ephemeral_sqlite_problem,
    load_env_file,
    load_llm_settings,
    load_settings,
    shutdown_budget,
)
from app.settings.dburl import async_database_url, postgres_engine_options
from app.store import Store
from app.store.postgres import PostgresBackend, split_pool
from tests.conftest import PG_ENV
from tests.test_docs import documented_settings

ROOT = Path(__file__).resolve().parents[1]
HEROKU_KILL_SECONDS = 30
REQUIRED = {"APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET"}


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    joined = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_dockerfile_runs_the_server_as_a_non_root_user_with_a_healthcheck() -> None:
    steps = dockerfile()
    instructions = [i for i, _ in steps]
    base = next(rest for i, rest in steps if i == "FROM")
    assert re.fullmatch(r"python:3\.\d+-slim", base)
    assert base.split(":")[1].removesuffix("-slim") == (ROOT / ".python-version").read_text().strip()
    users = [rest for i, rest in steps if i == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert instructions.index("USER") < instructions.index("CMD")
    # every RUN after USER would run unprivileged; installing happens before it, test extras never
    installs = [rest for i, rest in steps if i == "RUN" and "pip install" in rest]
    assert installs and all("[test]" not in cmd and "-e " not in cmd for cmd in installs)
    assert any(re.search(r"pip install (--no-deps )?\.$", cmd) for cmd in installs)
    assert json.loads(next(rest for i, rest in steps if i == "CMD")) == ["python", "-m", "app", "serve"]
    health = next(rest for i, rest in steps if i == "HEALTHCHECK")
    assert "/healthz" in health and "PORT" in health
    env = " ".join(rest for i, rest in steps if i == "ENV")
    port = re.search(r"\bPORT=(\d+)", env)
    assert port is not None and next(rest for i, rest in steps if i == "EXPOSE") == port.group(1)
    database = re.search(r"\bDATABASE_URL=(\S+)", env)
    volume = json.loads(next(rest for i, rest in steps if i == "VOLUME"))
    assert database is not None and async_database_url(database.group(1)).endswith(
        volume[0] + "/revbot.sqlite3"
    )


def test_the_healthcheck_command_is_valid_python() -> None:
    health = next(rest for i, rest in dockerfile() if i == "HEALTHCHECK")
    command = json.loads(health.split("CMD", 1)[1])
    assert command[:2] == ["python", "-c"]
    compile(command[2], "HEALTHCHECK", "exec")


def test_fly_toml_checks_health_keeps_sqlite_on_a_volume_and_waits_for_the_shutdown() -> None:
    fly = tomllib.loads((ROOT / "fly.toml").read_text())
    service = fly["http_service"]
    env = fly["env"]
    assert service["internal_port"] == int(env["PORT"])
    assert [c["path"] for c in service["checks"]] == ["/healthz"]
    assert fly["kill_signal"] == "SIGTERM"
    assert fly["kill_timeout"] > DEFAULT_SHUTDOWN_SECONDS
    (mount,) = fly["mounts"]
    assert (
        async_database_url(env["DATABASE_URL"])
        == f"sqlite+aiosqlite:///{mount['destination']}/revbot.sqlite3"
    )
    assert "fly postgres attach" in (ROOT / "fly.toml").read_text()
    assert fly["build"]["dockerfile"] == "Dockerfile"


def test_app_json_describes_a_heroku_button_with_postgres() -> None:
    manifest = json.loads((ROOT / "app.json").read_text())
    assert [a["plan"].split(":")[0] for a in manifest["addons"]] == ["heroku-postgresql"]
    assert "web" in manifest["formation"]
    assert manifest["buildpacks"] == [{"url": "heroku/python"}]
    env = manifest["env"]
    assert {name for name, spec in env.items() if spec.get("required")} == REQUIRED
    assert all(spec["description"] for spec in env.values())
    assert set(env) <= documented_settings()
    procfile = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines())
    assert procfile["web"] == "python -m app serve"


def test_env_example_and_gitignore() -> None:
    names = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    assert names >= REQUIRED
    assert names <= documented_settings()
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert ".env" in ignored and "*.pem" in ignored
    docker_ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ".env" in docker_ignored and "*.pem" in docker_ignored


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution the requirements pull in, by the installed metadata (markers applied)."""
    environment = default_environment()
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        marker_env: dict[str, str] = {**environment, "extra": extra}  # type: ignore[dict-item]  # a TypedDict
        if req.marker is not None and not req.marker.evaluate(marker_env):
            continue
        name = canonicalize_name(req.name)
        key = name + "[" + ",".join(sorted(req.extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        for sub in distribution(req.name).requires or []:
            for wanted in req.extras or {""}:
                todo.append((Requirement(sub), wanted))
    return {k.split("[")[0] for k in seen}


def declared_requirements() -> list[str]:
    """What the deploy files must install: the dependencies and the ``llm`` extra (the SDKs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["llm"]]


def pinned(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            pins[canonicalize_name(name)] = version
    return pins


def test_requirements_txt_pins_exactly_what_pyproject_needs() -> None:
    """Heroku's buildpack and the Dockerfile read requirements.txt; regenerate it with
    scripts/lock_requirements.py."""
    declared = declared_requirements()
    pins = pinned(ROOT / "requirements.txt")
    for spec in declared:
        req = Requirement(spec)
        assert canonicalize_name(req.name) in pins, f"{req.name} missing: run scripts/lock_requirements.py"
        assert req.specifier.contains(pins[canonicalize_name(req.name)]), f"{spec} vs the pin"
    assert set(pins) == _closure(declared), "requirements.txt is stale: run scripts/lock_requirements.py"


def test_the_deployed_set_carries_every_linter_the_reviewer_runs() -> None:
    """The Docker image and Heroku install requirements.txt: each linter's wheel (its binary
    inside, nothing downloaded at install) must be pinned there, and installed here."""
    from app.review.analyzers import LINTERS, find_tool

    pins = pinned(ROOT / "requirements.txt")
    for tool in LINTERS:
        assert canonicalize_name(tool.package) in pins, f"{tool.package} is not deployed"
        assert find_tool(tool.program) is not None, f"{tool.program} is not installed"


def test_requirements_test_txt_is_the_deployed_set_and_the_test_tools_pinned_alike() -> None:
    """The suite installs with requirements-test.txt as constraints: it must pin every package
    the test extra pulls in (an unpinned one would float with the registry) and pin what is
    deployed at the deployed version (so what is tested is what runs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    tested = [*declared_requirements(), *project["optional-dependencies"]["test"]]
    pins = pinned(ROOT / "requirements-test.txt")
    deployed = pinned(ROOT / "requirements.txt")
    assert {name: pins.get(name) for name in deployed} == deployed, "the two locks disagree"
    for spec in tested:
        req = Requirement(spec)
        assert req.specifier.contains(pins[canonicalize_name(req.name)]), f"{spec} vs the pin"
    assert set(pins) == _closure(tested), "requirements-test.txt is stale: run scripts/lock_requirements.py"


def readme_command(heading_words: str) -> list[str]:
    """The shell words of the README's fenced command that follows the paragraph starting with
    ``heading_words`` (the README's two commands)."""
    section = (ROOT / "README.md").read_text().split("## Two commands", 1)[1]
    after = section.split(heading_words, 1)[1]
    block = after.split("```sh\n", 1)[1].split("```", 1)[0]
    return shlex.split(block.strip())


@pytest.mark.parametrize(
    ("paragraph", "lock"),
    [("See the whole bot", "requirements.txt"), ("Run the tests", "requirements-test.txt")],
)
def test_the_readmes_two_commands_install_a_locked_set(paragraph: str, lock: str) -> None:
    words = readme_command(paragraph)
    install = words[words.index("install") : words.index("&&", words.index("install"))]
    assert install[install.index("-c") + 1] == lock and (ROOT / lock).is_file()
    if lock == "requirements-test.txt":
        # CI installs exactly as the README says
        ci = (ROOT / ".ci/run").read_text().splitlines()
        installs = [shlex.split(line, comments=True) for line in ci if line.startswith("pip install")]
        assert installs == [["pip", "install", "-q", *install[1:]]]


def lock_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock_requirements", ROOT / "scripts/lock_requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("locked", "newest", "said"),
    [
        ({"a": "1.0"}, {"a": "1.0"}, []),
        ({"a": "1.0"}, {"a": "1.1"}, ["a: locked at 1.0; 1.1 is allowed by pyproject.toml"]),
        ({"a": "2.0"}, {"a": "1.9"}, []),  # the registry pulled a release: the pin stays, no drift
        ({"a": "1.0"}, {"a": "1.0", "b": "3"}, ["b: not locked; a fresh resolution adds 3"]),
        ({"a": "1.0", "c": "1"}, {"a": "1.0"}, ["c: locked at 1; a fresh resolution no longer needs it"]),
        (
            {"z": "1", "a": "1"},
            {"z": "2", "a": "2"},
            [
                "a: locked at 1; 2 is allowed by pyproject.toml",
                "z: locked at 1; 2 is allowed by pyproject.toml",
            ],
        ),
        ({"a": "1.0"}, {"a": "1.0.post1"}, ["a: locked at 1.0; 1.0.post1 is allowed by pyproject.toml"]),
        ({"a": "1.0"}, {"a": "1.0.0"}, []),  # the same version spelt otherwise
    ],
)
def test_lock_drift_is_reported_from_the_lock_and_a_resolution(
    locked: dict[str, str], newest: dict[str, str], said: list[str]
) -> None:
    """``lock_requirements.py --check``'s comparison (pure: no test asks the registry)."""
    assert lock_script().drift(locked, newest) == said


def test_the_lock_scripts_closure_follows_extras_and_markers() -> None:
    """Both locks come from one resolution, cut by ``closure``: an extra's requirements only when
    the extra is asked for, a marker that does not hold leaves its requirement out."""
    script = lock_script()
    resolved = {
        "a": script.Resolved("a", "1", ("b", "c; extra == 'x'", "d; python_version < '3'")),
        "b": script.Resolved("b", "1", ()),
        "c": script.Resolved("c", "1", ("b",)),
        "d": script.Resolved("d", "1", ()),
    }
    assert script.closure(["a"], resolved) == {"a", "b"}
    assert script.closure(["a[x]"], resolved) == {"a", "b", "c"}


def install_sets() -> dict[str, dict[str, str]]:
    """Per platform, the pinned packages it installs, read as the platform reads its files: the
    Dockerfile's ``pip install`` steps (``-r FILE``; the project itself goes ``--no-deps``),
    Heroku's Python buildpack ``requirements.txt`` (app.json names that buildpack), Fly the image
    its fly.toml builds."""
    docker: dict[str, str] = {}
    for instruction, command in dockerfile():
        if instruction == "RUN" and "pip install" in command:
            args = command.split("pip install", 1)[1].split()
            assert "--no-deps" in args or "-r" in args, f"an unpinned install: {command}"
            for flag, value in itertools.pairwise(args):
                if flag == "-r":
                    docker.update(pinned(ROOT / value))
    manifest = json.loads((ROOT / "app.json").read_text())
    assert manifest["buildpacks"] == [{"url": "heroku/python"}]
    fly = tomllib.loads((ROOT / "fly.toml").read_text())
    assert fly["build"]["dockerfile"] == "Dockerfile"
    return {"docker": docker, "heroku": pinned(ROOT / "requirements.txt"), "fly": docker}


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["docker", "heroku", "fly"])
def test_every_platform_installs_the_model_sdks_and_they_import(platform: str) -> None:
    """REVIEWER=llm with no file edited: each platform's install set holds both SDKs and what they
    need, at versions the llm extra allows; those exact versions import and build both providers."""
    installs = install_sets()[platform]
    llm = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["llm"]
    for spec in llm:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in installs and req.specifier.contains(installs[name]), f"{platform}: {spec}"
        assert distribution(req.name).version == installs[name], "the tested SDK is not the one deployed"
    assert _closure(llm) <= set(installs), f"{platform} misses a dependency of the SDKs"
    for provider, sdk in (("openai", "openai"), ("anthropic", "anthropic")):
        built = make_provider(
            load_llm_settings({"LLM_PROVIDER": provider, "LLM_MODEL": "m", "LLM_API_KEY": "k"})
        )
        assert type(built.client).__module__.split(".")[0] == sdk  # type: ignore[attr-defined]


# ------------------------------------------------------------------ settings the deploy files rely on
@pytest.mark.parametrize(
    ("url", "ssl", "rest"),
    [
        (
            "postgresql+asyncpg://u:p@db:5432/x?sslmode=require",
            "require",
            "postgresql+asyncpg://u:p@db:5432/x",
        ),
        ("postgresql+asyncpg://u:p@db/x?sslmode=disable", "disable", "postgresql+asyncpg://u:p@db/x"),
        (
            "postgresql+asyncpg://u:p@db/x?sslmode=prefer&application_name=bot",
            "prefer",
            "postgresql+asyncpg://u:p@db/x?application_name=bot",
        ),
        (
            "postgresql+asyncpg://u:p%40ss@db/x?sslmode=verify-full",
            "verify-full",
            "postgresql+asyncpg://u:p%40ss@db/x",
        ),
        ("postgresql+asyncpg://u:p@db/x", None, "postgresql+asyncpg://u:p@db/x"),
    ],
)
def test_sslmode_becomes_asyncpgs_ssl_argument(url: str, ssl: str | None, rest: str) -> None:
    clean, options = postgres_engine_options(url, pool_size=3)
    assert clean == rest
    assert options["connect_args"] == ({"ssl": ssl} if ssl else {})
    assert options["pool_size"] == 3 and options["max_overflow"] == 0


def test_a_bad_sslmode_is_a_configuration_error_naming_database_url(private_key_pem: str) -> None:
    env = {
        "APP_ID": "1",
        "PRIVATE_KEY": private_key_pem,
        "WEBHOOK_SECRET": "s",
        "DATABASE_URL": "postgres://u:p@db/x?sslmode=sometimes",
    }
    with pytest.raises(ConfigError) as caught:
        load_settings(env)
    assert caught.value.setting == "DATABASE_URL" and "sslmode" in caught.value.problem


def test_two_processes_fit_a_20_connection_plan(private_key_pem: str) -> None:
    settings, _ = load_settings({"APP_ID": "1", "PRIVATE_KEY": private_key_pem, "WEBHOOK_SECRET": "s"})
    _, options = postgres_engine_options("postgresql+asyncpg://db/x", pool_size=settings.database_pool_size)
    assert 2 * (options["pool_size"] + options["max_overflow"]) <= 20 - 2


@pytest.mark.pg
@pytest.mark.parametrize("mode", ["disable", "prefer"])
async def test_postgres_urls_with_sslmode_connect(mode: str) -> None:
    """Heroku's ``postgres://...?sslmode=`` form, as pasted, reaches the server (the local one has
    no TLS, so ``require`` would be refused by the server, not crash with a TypeError)."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"{PG_ENV} is not set")
    pasted = "postgres://" + url.split("://", 1)[1] + f"?sslmode={mode}"
    store = Store(async_database_url(pasted), pool_size=2)
    try:
        assert await store.ping()
        async with store.backend.read() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        # two connections in all: the shared pool and the ledger insert's own
        assert isinstance(store.backend, PostgresBackend)
        assert store.backend.engine.pool.size() + split_pool(2)[1] == 2  # type: ignore[attr-defined]
    finally:
        await store.close()


@pytest.mark.parametrize(("total", "drain", "grace"), [(20.0, 5.0, 15.0), (8.0, 2.0, 6.0), (60.0, 5.0, 55.0)])
def test_shutdown_budget_splits_the_window(total: float, drain: float, grace: float) -> None:
    assert shutdown_budget(total) == (drain, grace)


def test_default_shutdown_fits_herokus_window_with_margin() -> None:
    drain, grace = shutdown_budget(DEFAULT_SHUTDOWN_SECONDS)
    assert drain + grace < 25 < HEROKU_KILL_SECONDS


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({"DYNO": "web.1"}, True),
        ({"DYNO": "web.1", "DATABASE_URL": "sqlite:///data/x.sqlite3"}, True),
        ({"DYNO": "web.1", "ALLOW_EPHEMERAL_SQLITE": "1"}, False),
        ({"DYNO": "web.1", "DATABASE_URL": "postgres://u:p@db/x"}, False),
        ({}, False),
    ],
)
def test_sqlite_on_a_heroku_dyno_is_refused(env: dict[str, str], refused: bool, private_key_pem: str) -> None:
    base = {"APP_ID": "1", "PRIVATE_KEY": private_key_pem, "WEBHOOK_SECRET": "s"}
    settings, _ = load_settings({**base, **{k: v for k, v in env.items() if k != "DYNO"}})
    problem = ephemeral_sqlite_problem(settings, env)
    assert (problem is not None) is refused
    if problem is not None:
        assert problem.setting == "DATABASE_URL" and "ALLOW_EPHEMERAL_SQLITE=1" in problem.problem


@pytest.mark.slow
def test_serve_on_a_dyno_with_sqlite_exits_2_with_one_line(tmp_path: Path, private_key_pem: str) -> None:
    env = {
        **os.environ,
        "APP_ID": "1",
        "PRIVATE_KEY": private_key_pem,
        "WEBHOOK_SECRET": "s",
        "DYNO": "web.1",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "DATABASE_URL" in lines[0] and "Heroku" in lines[0]
    assert not (tmp_path / "data").exists()


def test_env_file_fills_what_the_environment_lacks(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text('APP_ID=7\nWEBHOOK_SECRET=from-file\nPRIVATE_KEY="-----BEGIN\\nX"\n# comment\n')
    environ = {"WEBHOOK_SECRET": "from-env"}
    assert load_env_file(path, environ)
    assert environ == {"APP_ID": "7", "WEBHOOK_SECRET": "from-env", "PRIVATE_KEY": "-----BEGIN\nX"}
    assert not load_env_file(tmp_path / "missing", environ)


@pytest.mark.slow
def test_serve_reads_dot_env_from_the_working_directory(tmp_path: Path) -> None:
    """A .env with a bad setting proves it was read: the error names the setting from the file."""
    (tmp_path / ".env").write_text("APP_ID=not-a-number\n")
    env = {k: v for k, v in os.environ.items() if k not in ("APP_ID", "PRIVATE_KEY", "WEBHOOK_SECRET")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve"],
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "APP_ID" in done.stderr and "valid integer" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve"],
        env={**env, "APP_ID": "0", "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "APP_ID" in done.stderr and "greater than 0" in done.stderr


async def test_the_worker_grace_is_what_shutdown_timeout_leaves_after_the_http_drain(
    tmp_path: Path, private_key_pem: str
) -> None:
    from app.runtime import Runtime
    from tests.harness import free_port

    settings, pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": private_key_pem,
            "WEBHOOK_SECRET": "s",
            "SHUTDOWN_TIMEOUT": "8",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
            "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
        }
    )
    runtime = Runtime(settings, pem)
    await runtime.start()
    try:
        assert runtime.worker is not None and runtime.worker.options.shutdown_grace == 6.0
    finally:
        await runtime.stop()
