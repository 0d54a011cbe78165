"""``flask databases …``: operator commands for the databases created at run time."""

import click
from flask import Flask

from .errors import QuarryError
from .services import agents as agent_service
from .services import databases as service


def register_databases_cli(app: Flask) -> None:
    @app.cli.group("databases")
    def databases() -> None:
        """Databases connected at run time (CREATE DATABASE, /api/databases)."""

    @databases.command("rotate-key")
    def rotate_key() -> None:
        """Encrypt every stored password (and agents' and skills' API keys) again with the
        newest QUARRY_ENCRYPTION_KEY key.

        Put the new key first in QUARRY_ENCRYPTION_KEY (keep the old one after it), run
        this, then remove the old key.
        """
        try:
            count = service.rotate_key()
            agents = agent_service.rotate_secrets()
        except QuarryError as exc:
            raise click.ClickException(exc.detail) from None
        click.echo(f"{count} database(s) and {agents} agent(s) or skill(s) re-encrypted with "
                   "the newest key")
