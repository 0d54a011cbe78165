"""uploaded files: one row per file uploaded as the table files.<name>

The bytes are a Parquet file in FILES_DIR; the row keeps what GET /api/files/ lists. The
lower-cased name is unique, so two racing uploads of one new name cannot both be stored.

Revision ID: 0010_files
Revises: 0009_names
Create Date: 2026-11-25 19:10:00

"""
import sqlalchemy as sa
from alembic import op

revision = "0010_files"
down_revision = "0009_names"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "uploaded_files",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("name_key", sa.String(63), nullable=False),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("original_name", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_uploaded_files")),
        sa.UniqueConstraint("name_key", name=op.f("uq_uploaded_files_name_key")),
    )


def downgrade():
    op.drop_table("uploaded_files")
