"""Enough of systemd to run a unit's ExecStart outside it: unit files, EnvironmentFile syntax, specifiers and the
expansion of ``${VAR}`` / ``$VAR`` on the command line (systemd.service(5), systemd.exec(5), systemd.unit(5)).

Strict where systemd would silently do something else: an undefined variable on the command line, an unknown
specifier or an ``export`` line in an environment file is an error here, not an empty string.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SYSTEMD = DEPLOY / "systemd"
MASTER_UNIT = SYSTEMD / "pai-master.service"
AGENT_UNIT = SYSTEMD / "pai-agent@.service"
MASTER_ENV = DEPLOY / "master.env.example"
AGENT_ENV = DEPLOY / "agent.env.example"
ETC = "/etc/pai/"  # where the units read their environment files
STATE = "/var/lib"  # %S of a system unit

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_WORD_VAR = re.compile(rf"\$({_NAME})")
_BRACED = re.compile(rf"\$\{{({_NAME})\}}")


@dataclass
class Unit:
    path: Path
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def value(self, section: str, key: str) -> str:
        found = self.values(section, key)
        assert len(found) == 1, f"{self.path.name}: [{section}] {key}= is set {len(found)} times"
        return found[0]

    def words(self, section: str, key: str) -> list[str]:
        """Every word of every ``key=`` line (After=, Wants=, ...), which systemd accumulates."""
        return [w for v in self.values(section, key) for w in v.split()]


def parse_unit(path: Path) -> Unit:
    unit = Unit(path)
    section: str | None = None
    pending = ""
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.sections.setdefault(section, [])
            continue
        key, sep, value = line.partition("=")
        assert sep and section is not None, f"{path.name}:{number}: not a key=value line in a section: {raw!r}"
        unit.sections[section].append((key.strip(), value.strip()))
    assert not pending, f"{path.name}: ends in a continuation"
    return unit


def parse_env_file(text: str, name: str = "environment file") -> dict[str, str]:
    """An EnvironmentFile: ``KEY=value`` lines, ``#``/``;`` comments, values optionally in single or double quotes."""
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        assert not line.startswith("export "), f"{name}:{number}: systemd does not take 'export'"
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(_NAME, key), f"{name}:{number}: not KEY=value: {raw!r}"
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            assert not any(c in value for c in " \t'\""), f"{name}:{number}: quote a value with spaces: {raw!r}"
        assert "$" not in value and "\\" not in value, f"{name}:{number}: no $ or \\ in values: {raw!r}"
        env[key] = value
    return env


def commented_settings(text: str) -> dict[str, str]:
    """The ``#NAME=value`` lines: settings a sample leaves at their default."""
    return {m[1]: m[2] for m in re.finditer(rf"(?m)^#({_NAME})=(.*)$", text)}


def expand_specifiers(text: str, instance: str | None = None, state: str = STATE) -> str:
    def one(m: re.Match[str]) -> str:
        spec = m[1]
        if spec == "%":
            return "%"
        if spec == "S":
            return state
        if spec == "i":
            assert instance is not None, f"%i outside a template instance: {text!r}"
            return instance
        raise AssertionError(f"specifier %{spec} is not handled by this test: {text!r}")

    return re.sub(r"%(.)", one, text)


def environment_assignments(value: str) -> dict[str, str]:
    """One ``Environment=`` line: space-separated ``KEY=value`` words, each optionally quoted."""
    env = {}
    for word in shlex.split(value):
        key, sep, val = word.partition("=")
        assert sep and re.fullmatch(_NAME, key), f"Environment=: not KEY=value: {word!r}"
        env[key] = val
    return env


def expand_command(line: str, env: dict[str, str]) -> list[str]:
    """ExecStart's words after systemd's substitution: ``${VAR}`` is replaced within its word (one argument), a
    word that is exactly ``$VAR`` becomes the value split at whitespace (none for an empty value)."""
    argv: list[str] = []
    for word in shlex.split(line):
        alone = _WORD_VAR.fullmatch(word)
        if alone:
            assert alone[1] in env, f"ExecStart uses ${alone[1]}, which nothing defines"
            argv.extend(env[alone[1]].split())
            continue

        def braced(m: re.Match[str]) -> str:
            assert m[1] in env, f"ExecStart uses ${{{m[1]}}}, which nothing defines"
            return env[m[1]]

        expanded = _BRACED.sub(braced, word)
        assert "$" not in _BRACED.sub("", word), f"ExecStart word {word!r}: use ${{VAR}} inside a word"
        argv.append(expanded)
    return argv


def variables_used(line: str) -> set[str]:
    return set(_BRACED.findall(line)) | {m[1] for w in shlex.split(line) if (m := _WORD_VAR.fullmatch(w))}


@dataclass(frozen=True)
class Service:
    argv: list[str]  # ExecStart, expanded
    env: dict[str, str]  # what the unit puts into the process's environment
    state_dirs: list[Path]  # StateDirectory=, under %S


def service(unit_path: Path, etc: Path, state: Path, instance: str | None = None) -> Service:
    """What systemd would run for ``unit_path``: Environment=, then each EnvironmentFile= (``/etc/pai/X`` read from
    ``etc/X``; a ``-`` prefix makes it optional; later values win), then ExecStart expanded."""
    unit = parse_unit(unit_path)
    env: dict[str, str] = {}
    for value in unit.values("Service", "Environment"):
        env.update(environment_assignments(expand_specifiers(value, instance, str(state))))
    for value in unit.values("Service", "EnvironmentFile"):
        optional = value.startswith("-")
        name = expand_specifiers(value.removeprefix("-"), instance, str(state))
        assert name.startswith(ETC), f"{unit_path.name}: EnvironmentFile={value} is not under {ETC}"
        path = etc / name.removeprefix(ETC)
        if optional and not path.exists():
            continue
        env.update(parse_env_file(path.read_text(), str(path)))
    line = expand_specifiers(unit.value("Service", "ExecStart"), instance, str(state))
    dirs = [state / expand_specifiers(d, instance, str(state)) for d in unit.words("Service", "StateDirectory")]
    return Service(expand_command(line, env), env, dirs)
