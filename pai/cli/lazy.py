"""A command that stands in its group's help by its name and line, and is imported when it runs (or when its own
``--help`` is asked for): a group lists it without waiting for its module's imports (the server commands in
``pai --help``, the replay in ``pai vc --help``)."""

from __future__ import annotations

import importlib

import click


class LazyCommand(click.Command):
    def __init__(self, name: str, module: str, attribute: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, add_help_option=False, context_settings={
            "ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []})
        self._target = (module, attribute)

    def load(self) -> click.Command:
        module, attribute = self._target
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> object:
        command = self.load()
        with command.make_context(ctx.info_name, list(ctx.args), parent=ctx.parent) as real:
            return command.invoke(real)
