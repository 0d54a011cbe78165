"""One blueprint module per resource, registered here."""

from flask import Flask
from flask_smorest import Api

from . import (
    access,
    agents,
    auth,
    console,
    databases,
    files,
    models,
    openapi,
    projects,
    skills,
    sql,
    sqlviews,
    status,
    tree,
    unsupported,
)


def register_blueprints(app: Flask, api: Api) -> None:
    openapi.register_converters(app, api)
    api.register_blueprint(status.blp)
    api.register_blueprint(auth.blp)
    api.register_blueprint(projects.blp)
    api.register_blueprint(skills.blp)
    api.register_blueprint(agents.blp)
    api.register_blueprint(models.blp)
    api.register_blueprint(sql.blp)
    api.register_blueprint(access.blp)
    api.register_blueprint(status.metrics_blp)
    api.register_blueprint(unsupported.blp)
    api.register_blueprint(databases.blp)
    api.register_blueprint(files.blp)
    api.register_blueprint(tree.blp)
    api.register_blueprint(sqlviews.blp)
    api.register_blueprint(console.blp)
    # The published interface documents skills and agents without the /api prefix too:
    # the same blueprints (same handlers) registered a second time under another name.
    app.register_blueprint(skills.blp, url_prefix="/projects/<name:project>/skills",
                           name="skills_unprefixed")
    app.register_blueprint(agents.blp, url_prefix="/projects/<name:project>",
                           name="agents_unprefixed")
    openapi.document(app, api)
