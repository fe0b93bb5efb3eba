"""deploy/docker/Dockerfile (not built here: no registry serves its base image to this project's machines).

It installs the project the README's way, from a build context that holds everything that install needs; the
images run real ``pai`` commands as a user of their own, on the master's port and data directory."""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from pathlib import Path

import pytest

from pai.rest_server.config import MasterConfig
from pai.rest_server.routes import routes
from tests.deploy.dockerfile import Dockerfile, copy_sources, healthcheck, parse
from tests.deploy.settings import ROOT, check_pai_command

DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
IGNORE = DOCKERFILE.with_name("Dockerfile.dockerignore")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse(DOCKERFILE)


def _readme_setup_command() -> str:
    """The install command of the README's first code block (``bash scripts/setup.sh && pai up ...``)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README has no bash block"
    return block[1].splitlines()[0].split("&&")[0].strip()


def _commands(run: str) -> list[str]:
    return [c.strip() for c in re.split(r"&&|;|\|\|", run)]


def _option(argv: list[str], flag: str) -> str:
    assert flag in argv, f"{flag} not in {argv}"
    return argv[argv.index(flag) + 1]


def test_the_base_image_is_a_public_python_image_the_project_supports(dockerfile: Dockerfile) -> None:
    base = dockerfile.stages["base"].image
    name, _, tag = base.partition(":")
    assert name == "python" and tag and tag != "latest", f"pin an official python image by tag: {base}"
    version = tuple(int(x) for x in tag.split("-")[0].split("."))
    required = tuple(int(x) for x in PYPROJECT["project"]["requires-python"].removeprefix(">=").split("."))
    assert version >= required


def test_both_images_are_targets_built_on_the_same_install(dockerfile: Dockerfile) -> None:
    assert {s.image for s in (dockerfile.stages["master"], dockerfile.stages["agent"])} == {"base"}


def test_the_install_is_the_readmes_and_nothing_else_installs_the_project(dockerfile: Dockerfile) -> None:
    setup = _readme_setup_command()
    assert setup == "bash scripts/setup.sh"
    runs = [c for i in dockerfile.stages["base"].all("RUN") for c in _commands(i.args)]
    assert setup in runs
    every_run = [c for s in dockerfile.stages.values() for i in s.all("RUN") for c in _commands(i.args)]
    assert not [c for c in every_run if "pip install" in c], "install the project only through scripts/setup.sh"


def _context_needs() -> list[str]:
    """What scripts/setup.sh reads from the project: the metadata, the readme it names, the packages, the scripts
    (setup.sh and what it sources)."""
    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    needs = ["pyproject.toml", PYPROJECT["project"]["readme"], "scripts/setup.sh"]
    needs += [m[1] for m in re.finditer(r"(?m)^\. (scripts/\S+)", (ROOT / "scripts" / "setup.sh").read_text())]
    needs += sorted({p.rstrip("*") for p in find})
    return needs


def test_the_build_context_copied_holds_what_setup_needs(dockerfile: Dockerfile) -> None:
    copied = [src.rstrip("/") for i in dockerfile.stages["base"].all("COPY") for src in copy_sources(i)[0]]
    missing = [n for n in _context_needs() if not any(n == c or n.startswith(c + "/") for c in copied)]
    assert missing == []
    assert "scripts/python.sh" in _context_needs()  # setup.sh's sourced file is found


def _ignored(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch(rel, p) or fnmatch(rel, p.removeprefix("**/")) or any(fnmatch(x, p.removeprefix("**/"))
               for x in parts) for p in patterns)


def test_the_copied_context_builds_the_project_with_every_module(dockerfile: Dockerfile, tmp_path: Path) -> None:
    """Assemble what the COPY instructions put into the image (less the ignore file's patterns) and build the
    project's wheel from it, as pip does under scripts/setup.sh: every module and schema must be in it."""
    patterns = [line.strip() for line in IGNORE.read_text().splitlines() if line.strip() and line[0] != "#"]
    context = tmp_path / "opt-pai"
    for ins in dockerfile.stages["base"].all("COPY"):
        sources, dest = copy_sources(ins)
        for src in sources:
            path = ROOT / src
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            for f in files:
                rel = f.relative_to(ROOT).as_posix()
                if _ignored(rel, patterns):
                    continue
                target = context / dest / (f.name if path.is_file() else f.relative_to(path))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target)
    # The build backend installed here when there is one (offline), else pip fetches it as setup.sh's pip would.
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "--quiet",
                        "--wheel-dir", str(tmp_path / "wheel"), str(context)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    (wheel,) = (tmp_path / "wheel").glob("pai-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {p.relative_to(ROOT).as_posix() for pkg in ("pai", "job_schemas") for p in (ROOT / pkg).rglob("*")
              if p.is_file() and p.suffix in (".py", ".json") and "__pycache__" not in p.parts}
    assert wanted - names == set()


@pytest.mark.parametrize("target", ["master", "agent"])
def test_the_images_run_as_the_pai_user(dockerfile: Dockerfile, target: str) -> None:
    users = dockerfile.effective(target, "USER")
    assert users and users[-1].args == "pai"
    creates = [c for i in dockerfile.effective(target, "RUN") for c in _commands(i.args) if c.startswith("useradd")]
    assert creates and shlex.split(creates[0])[-1] == "pai"


def test_the_master_image_runs_pai_master_on_the_masters_port(dockerfile: Dockerfile) -> None:
    master = dockerfile.stages["master"]
    argv = master.one("ENTRYPOINT").exec_form()
    assert not master.all("CMD")  # extra flags from `docker run IMAGE ...` / compose's command are appended
    params = check_pai_command(argv)
    assert params["host"] == "0.0.0.0"
    # The REST API's port, then the launcher's (on PostgreSQL; --launcher-port's default).
    launcher = MasterConfig(port=params["port"], workers=2).launcher_port_number
    assert master.one("EXPOSE").args.split() == [str(params["port"]), str(launcher)]
    assert params["port"] == MasterConfig().port


def test_the_master_image_keeps_its_data_directory_in_a_volume_of_the_pai_user(dockerfile: Dockerfile) -> None:
    master = dockerfile.stages["master"]
    env = dict(shlex.split(i.args)[0].split("=", 1) for i in master.all("ENV"))
    data_dir = env["PAI_DATA_DIR"]
    assert data_dir == "/var/lib/pai/master"  # as on bare metal (pai-master.service's StateDirectory)
    assert master.one("VOLUME").exec_form() == [data_dir]
    assert any(shlex.split(i.args)[-1] == data_dir and "-o pai" in i.args for i in master.all("RUN"))


def test_the_healthcheck_asks_the_masters_health_endpoint(dockerfile: Dockerfile) -> None:
    master = dockerfile.stages["master"]
    opts, command = healthcheck(master.one("HEALTHCHECK"))
    assert {"interval", "timeout", "start-period", "retries"} <= opts.keys()
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/[\w/.-]*)", " ".join(command))
    assert url, command
    assert url[1] == master.one("EXPOSE").args.split()[0]  # the REST API's
    served = {r.path.split("{")[0] for r in routes if r.method == "GET"}
    assert url[2] == "/healthz" and url[2] in served
    assert command[0] == "python3"  # the slim image has no curl; the test of the running master runs this command


def test_the_agent_image_runs_pai_agent_with_its_work_dir_and_log_port(dockerfile: Dockerfile) -> None:
    agent = dockerfile.stages["agent"]
    argv = agent.one("ENTRYPOINT").exec_form()
    params = check_pai_command(argv, {"PAI_MASTER_URL": "http://master:9186", "PAI_AGENT_TOKEN": "t"})
    assert agent.one("EXPOSE").args == str(params["log_port"]) == _option(argv, "--log-port")
    work_dir = _option(argv, "--work-dir")
    assert any(shlex.split(i.args)[-1] == work_dir and "-o pai" in i.args for i in agent.all("RUN"))
