"""Extensions, created unbound here and bound to the app in the factory.

The lowest floor with ``config`` and ``errors``: nothing here imports the rest of the app
(the OpenAPI ``Api`` object lives in ``app/api/openapi.py``).
"""

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase

# Named constraints, so that Alembic can alter and drop them on every backend.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


# Objects stay readable after a commit: a service reads the id of what it just wrote, and
# reloading it could meet a row another request deleted in between.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
migrate = Migrate()
