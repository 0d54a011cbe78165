"""One sheet of an XLSX workbook written as CSV: run as a child process of the upload
(``python -I sheet.py WORKBOOK SHEET TARGET MEMORY_BYTES``), never imported by the app.

openpyxl is pure Python and reads a sheet's XML a row element at a time: a workbook built to
hurt (one row of millions of cells, a huge shared-strings table) would grow the worker that
read it by gigabytes, and a slow one would hold it. Here it grows a process of its own,
whose address space is capped (RLIMIT_AS) and which the upload kills at its time limit;
the worker stays as it was. Exit codes: 0 written; 2 unreadable (the reason on stderr);
3 beyond the memory cap. Only the standard library and openpyxl are imported (-I keeps
this folder off the module path).
"""

import csv
import resource
import sys
import zipfile

UNREADABLE, TOO_LARGE = 2, 3


def write_sheet(workbook: str, sheet: str, target: str) -> None:
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    with open(workbook, "rb") as handle:
        try:
            # A file object, not the path: openpyxl judges a path by its extension.
            book = openpyxl.load_workbook(handle, read_only=True, data_only=True)
        except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError) as exc:
            sys.exit(_unreadable(f"The XLSX file cannot be read: {exc}"))
        try:
            if sheet and sheet not in book.sheetnames:
                sys.exit(_unreadable(f"The workbook has no sheet {sheet!r}; its sheets: "
                                     f"{', '.join(book.sheetnames)}"))
            rows = (book[sheet] if sheet else book.worksheets[0]).iter_rows(values_only=True)
            with open(target, "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                for row in rows:
                    writer.writerow(["" if v is None else v for v in row])
        finally:
            book.close()


def _unreadable(reason: str) -> int:
    print(reason, file=sys.stderr)
    return UNREADABLE


if __name__ == "__main__":
    source, name, out_path, memory = sys.argv[1:5]
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    try:
        write_sheet(source, name, out_path)
    except MemoryError:
        sys.exit(TOO_LARGE)
    except Exception as exc:  # noqa: BLE001 - malformed XML, bad cells: the file's fault
        sys.exit(_unreadable(f"The XLSX file cannot be read: {type(exc).__name__}: {exc}"))
