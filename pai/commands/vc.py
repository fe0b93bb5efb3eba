"""``pai vc simulate FILE``: one scheduling pass over a what-if scenario, printed as JSON; ``pai vc replay`` and
``pai vc replay-gen`` (pai.commands.replay): a whole workload in simulated time."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pai.cli.vcs import vc_list
from pai.commands.replay import replay_command, replay_gen_command
from pai.commands.yamlfile import read_mapping
from pai.domain.errors import PaiError


@click.group("vc")
def vc() -> None:
    """Virtual clusters: list them, or try a change offline."""


vc.add_command(vc_list)
vc.add_command(replay_command)
vc.add_command(replay_gen_command)


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
