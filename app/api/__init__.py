"""One blueprint module per resource, registered here."""

from flask import Flask, current_app, request

from . import (
    access,
    agents,
    auth,
    completions,
    console,
    databases,
    files,
    jobs,
    knowledge_bases,
    mcp,
    models,
    openapi,
    projects,
    skills,
    sql,
    sqlviews,
    status,
    tree,
)

# The routes whose bodies carry data rows (a batch to predict, the values of a statement's
# parameters) rather than the description of an object: they may be as large as
# MAX_DATA_BODY_BYTES; every other body stops at MAX_BODY_BYTES, long before the store.
DATA_ENDPOINTS = frozenset({"sql.run_query", "models.predict_model",
                            "knowledge_bases.insert_into_knowledge_base"})


def _data_body_limit() -> None:
    if request.endpoint in DATA_ENDPOINTS:
        request.max_content_length = current_app.config["MAX_DATA_BODY_BYTES"]


def register_blueprints(app: Flask, api: openapi.QuarryApi) -> None:
    openapi.register_converters(app, api)
    app.before_request(_data_body_limit)
    api.register_blueprint(status.blp)
    api.register_blueprint(auth.blp)
    api.register_blueprint(projects.blp)
    api.register_blueprint(skills.blp)
    api.register_blueprint(agents.blp)
    api.register_blueprint(models.blp)
    api.register_blueprint(sql.blp)
    api.register_blueprint(access.blp)
    api.register_blueprint(status.metrics_blp)
    api.register_blueprint(databases.blp)
    api.register_blueprint(files.blp)
    api.register_blueprint(tree.blp)
    api.register_blueprint(sqlviews.blp)
    api.register_blueprint(knowledge_bases.blp)
    api.register_blueprint(jobs.blp)
    api.register_blueprint(console.blp)
    api.register_blueprint(mcp.blp)
    api.register_blueprint(completions.blp)
    # The published interface documents skills and agents without the /api prefix too:
    # the same blueprints (same handlers) registered a second time under another name.
    app.register_blueprint(skills.blp, url_prefix="/projects/<name:project>/skills",
                           name="skills_unprefixed")
    app.register_blueprint(agents.blp, url_prefix="/projects/<name:project>",
                           name="agents_unprefixed")
    # The document is written when first read (QuarryApi.spec), not by every app made.
    api.document_when_read(lambda: openapi.document(app, api))
