"""Uploaded files (/api/files): MindsDB's listing shape, with size and created_at added."""

from marshmallow import Schema, fields

from .common import InputSchema, ShortString

_TRUTHY, _FALSY = {"true", "True", "1"}, {"false", "False", "0"}


class FileArgs(InputSchema):
    overwrite = fields.Boolean(load_default=False, truthy=_TRUTHY, falsy=_FALSY)
    sheet = ShortString(load_default=None)
    header = fields.Boolean(
        load_default=None, truthy=_TRUTHY, falsy=_FALSY,
        metadata={"description": "Whether the first row of a CSV, TSV or XLSX file names its "
                                 "columns (false: they are named column0, column1, …). "
                                 "Default: detected by DuckDB's CSV sniffer (a first row "
                                 "whose values fit the types of the rows below is data)"})


class FileOut(Schema):
    name = fields.String()
    row_count = fields.Integer()
    columns = fields.List(fields.String())
    size = fields.Integer(metadata={"description": "bytes of the stored Parquet file"})
    created_at = fields.DateTime()
