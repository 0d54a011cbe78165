"""``flask databases …``: operator commands for the databases created at run time."""

import click
from flask import Flask

from .errors import QuarryError
from .services import databases as service


def register_databases_cli(app: Flask) -> None:
    @app.cli.group("databases")
    def databases() -> None:
        """Databases connected at run time (CREATE DATABASE, /api/databases)."""

    @databases.command("rotate-key")
    def rotate_key() -> None:
        """Encrypt every stored password again with the newest QUARRY_ENCRYPTION_KEY key.

        Put the new key first in QUARRY_ENCRYPTION_KEY (keep the old one after it), run
        this, then remove the old key.
        """
        try:
            count = service.rotate_key()
        except QuarryError as exc:
            raise click.ClickException(exc.detail) from None
        click.echo(f"{count} database(s) re-encrypted with the newest key")
