"""Alembic environment, run through Flask-Migrate (``flask --app wsgi db upgrade``)."""

import logging
from logging.config import fileConfig

from alembic import context
from flask import current_app

config = context.config
if config.config_file_name is not None:
    # Keep the application's loggers alive: fileConfig disables them by default.
    fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger("alembic.env")

target_db = current_app.extensions["migrate"].db
config.set_main_option(
    "sqlalchemy.url",
    target_db.engine.url.render_as_string(hide_password=False).replace("%", "%%"))


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"),
                      target_metadata=target_db.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    def process_revision_directives(context, revision, directives):
        # An autogenerate run that finds no change writes no empty revision.
        autogenerate = getattr(config.cmd_opts, "autogenerate", False)
        if autogenerate and directives[0].upgrade_ops.is_empty():
            directives[:] = []
            logger.info("No changes in schema detected.")

    conf_args = dict(current_app.extensions["migrate"].configure_args)
    conf_args.setdefault("process_revision_directives", process_revision_directives)
    conf_args.setdefault("render_as_batch", True)  # SQLite alters tables by copying them
    with target_db.engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_db.metadata,
                          **conf_args)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
