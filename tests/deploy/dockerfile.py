"""A Dockerfile read the way the builder reads it: instructions (continuations joined, comments dropped), stages,
the exec (JSON) and shell forms, global ARG defaults substituted into FROM."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str
    line: int

    def exec_form(self) -> list[str]:
        """The JSON form (``["a", "b"]``); a shell form is an error: signals reach no shell-wrapped process."""
        value = json.loads(self.args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), self
        return value


@dataclass
class Stage:
    name: str
    image: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def one(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert len(found) == 1, f"stage {self.name}: {len(found)} {keyword} instructions"
        return found[0]


@dataclass
class Dockerfile:
    path: Path
    args: dict[str, str]  # ARG defaults before the first FROM
    stages: dict[str, Stage]

    def chain(self, name: str) -> list[Stage]:
        """The stage and the stages it is built FROM, base first."""
        stages = [self.stages[name]]
        while stages[0].image in self.stages:
            stages.insert(0, self.stages[stages[0].image])
        return stages

    def effective(self, name: str, keyword: str) -> list[Instruction]:
        return [i for s in self.chain(name) for i in s.all(keyword)]


def instructions(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line = pending + stripped
        pending = ""
        keyword, _, args = line.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    assert not pending, "the file ends in a continuation"
    return out


def parse(path: Path) -> Dockerfile:
    args: dict[str, str] = {}
    stages: dict[str, Stage] = {}
    current: Stage | None = None
    for ins in instructions(path.read_text()):
        if ins.keyword == "FROM":
            words = ins.args.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            current = stages[name] = Stage(name, image)
        elif current is None:
            assert ins.keyword == "ARG", f"line {ins.line}: {ins.keyword} before the first FROM"
            key, _, value = ins.args.partition("=")
            args[key] = value
        else:
            current.instructions.append(ins)
    return Dockerfile(path, args, stages)


def copy_sources(ins: Instruction) -> tuple[list[str], str]:
    """``COPY src... dest`` (no --from, no --chown here: the project is copied as root and read by all)."""
    words = shlex.split(ins.args)
    assert not any(w.startswith("--") for w in words), f"line {ins.line}: COPY flags are not expected here"
    return words[:-1], words[-1]


def healthcheck(ins: Instruction) -> tuple[dict[str, str], list[str]]:
    """``HEALTHCHECK [--opt=value...] CMD [...]``: the options and the command (exec form)."""
    opts: dict[str, str] = {}
    rest = ins.args
    while rest.startswith("--"):
        opt, _, rest = rest.partition(" ")
        key, _, value = opt[2:].partition("=")
        opts[key] = value
        rest = rest.strip()
    keyword, _, command = rest.partition(" ")
    assert keyword.upper() == "CMD", f"line {ins.line}: HEALTHCHECK {keyword}"
    return opts, Instruction("CMD", command.strip(), ins.line).exec_form()
