"""One blueprint module per resource, registered here."""

from copy import deepcopy

from flask import Flask
from flask_smorest import Api

from . import agents, auth, databases, models, projects, skills, sql, status, unsupported


def register_blueprints(app: Flask, api: Api) -> None:
    api.register_blueprint(status.blp)
    api.register_blueprint(auth.blp)
    api.register_blueprint(projects.blp)
    api.register_blueprint(skills.blp)
    api.register_blueprint(agents.blp)
    api.register_blueprint(models.blp)
    api.register_blueprint(sql.blp)
    api.register_blueprint(unsupported.blp)
    api.register_blueprint(databases.blp)
    # The published interface documents skills and agents without the /api prefix too:
    # the same blueprints (same handlers) registered a second time under another name.
    app.register_blueprint(skills.blp, url_prefix="/projects/<string:project>/skills",
                           name="skills_unprefixed")
    app.register_blueprint(agents.blp, url_prefix="/projects/<string:project>",
                           name="agents_unprefixed")
    _document_unprefixed(api)
    _document_security(api)


def _document_security(api: Api) -> None:
    """The three ways to sign in (used when QUARRY_AUTH_REQUIRED is on; docs/deploy.md)."""
    spec = api.spec
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.security_scheme("apiKey", {"type": "apiKey", "in": "header",
                                               "name": "X-Api-Key"})
    spec.components.security_scheme("session", {"type": "apiKey", "in": "cookie",
                                                "name": "session"})
    spec.options["security"] = [{"bearer": []}, {"apiKey": []}, {"session": []}, {}]


def _document_unprefixed(api: Api) -> None:
    """Add the unprefixed skill and agent paths to the OpenAPI document as well."""
    paths = api.spec._paths  # apispec keeps no public accessor for registered paths
    for path, operations in list(paths.items()):
        if path.startswith("/api/projects/{project}/") and (
                "/skills" in path or "/agent" in path):
            paths.setdefault(path.removeprefix("/api"), deepcopy(operations))
