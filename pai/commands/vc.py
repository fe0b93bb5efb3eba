"""``pai vc simulate FILE``: one scheduling pass over a what-if scenario, printed as JSON; ``pai vc replay`` and
``pai vc replay-gen`` (pai.commands.replay): a whole workload in simulated time."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pai.cli.lazy import LazyCommand
from pai.cli.vcs import vc_list
from pai.commands.yamlfile import read_mapping
from pai.domain.errors import PaiError

# the replay's commands, imported when one runs (they import the scheduler): name: (module, attribute, line)
REPLAY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "replay": ("pai.commands.replay", "replay_command",
               "Replay the workload in TRACE (JSON Lines) through the scheduler, per configuration."),
    "replay-gen": ("pai.commands.replay", "replay_gen_command",
                   "Write a synthetic trace shaped like Microsoft's Philly GPU clusters."),
}


@click.group("vc")
def vc() -> None:
    """Virtual clusters: list them, or try a change offline."""


vc.add_command(vc_list)
for _name, (_module, _attribute, _line) in REPLAY_COMMANDS.items():
    vc.add_command(LazyCommand(_name, _module, _attribute, _line))


@vc.command("simulate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def simulate_command(file: Path) -> None:
    """Run one scheduling pass over the scenario in FILE (YAML or JSON) and print the decision."""
    scenario = read_mapping(file, "a scenario with nodes, vcs, running, pending")
    from pai.jobspec.vcconfig import validate_scenario  # imported only when a simulation runs
    from pai.vc.simulate import simulate

    try:
        result = simulate(validate_scenario(scenario))
    except PaiError as e:
        raise click.ClickException(f"{file}: not a valid scenario (see docs/scheduling.md): {e.message}") from None
    click.echo(json.dumps(result, indent=2, sort_keys=True))
