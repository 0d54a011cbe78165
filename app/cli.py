"""Command-line commands (``flask --app wsgi <command>``)."""

import click
from flask import Flask

from .auth_cli import register_auth_cli
from .config import settings_table, write_readme_table
from .databases_cli import register_databases_cli
from .sql.demo import build_demo
from .sql.sources import demo_path


def register_cli(app: Flask) -> None:
    register_auth_cli(app)
    register_databases_cli(app)

    @app.cli.command("settings")
    @click.option("--readme", is_flag=True, help="Rewrite the table in ./README.md instead.")
    def show_settings(readme: bool) -> None:
        """Print every setting with its default, as a Markdown table."""
        if readme:
            write_readme_table()
        else:
            click.echo(settings_table())

    @app.cli.group("demo")
    def demo() -> None:
        """The embedded demo data source."""

    @demo.command("init")
    def demo_init() -> None:
        """(Re)build the demo SQLite database from scikit-learn's bundled datasets."""
        click.echo(f"demo database written to {build_demo(demo_path(app))}")
