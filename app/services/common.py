"""Transaction helpers shared by the services."""

from collections.abc import Callable

from sqlalchemy.exc import IntegrityError

from ..errors import QuarryError
from ..extensions import db


def commit(on_integrity_error: Callable[[], QuarryError]) -> None:
    """Commit the session; a constraint violation becomes the given error (usually 409).

    Uniqueness lives in the database: two requests racing for one name both pass any
    check made before the insert, and only the unique constraint tells them apart.
    """
    try:
        db.session.commit()
    except IntegrityError as exc:
        db.session.rollback()
        raise on_integrity_error() from exc
