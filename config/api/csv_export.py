"""The CSV files the service exports (`GET /blocklist.csv`): every cell goes through
`csv_cell`, so no exporter can forget it.

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (and a tab
or carriage return before one hides it): a value an outsider chose, such as an address
or a reason, could then run `=HYPERLINK(...)` or worse on the machine of whoever opens
the export (OWASP, "CSV injection"). Such a cell is written with a leading single quote,
which spreadsheets show as text and do not display; any other cell is unchanged.

`csv_cell_read` undoes it, for what reads an export back (POST /blocklist accepts the
`value` column as exported, docs/deliverability.md).
"""

import csv
from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """One cell as exported: its text, with a single quote before a formula's start."""
    text = "" if value is None else str(value)
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_cell_read(text: str) -> str:
    """A cell as it was before `csv_cell`: the quote before a formula's start taken off."""
    if text.startswith("'") and text[1:].startswith(FORMULA_STARTS):
        return text[1:]
    return text


class _Echo:
    """A file whose write returns what it was given: csv.writer's rows, one by one."""

    def write(self, value: str) -> str:
        return value


def csv_response(
    *, filename: str, header: list[str], rows: Iterable[Iterable[object]]
) -> StreamingHttpResponse:
    """A streamed CSV download: the header row, then each row, every cell through
    `csv_cell`. `rows` is read lazily, as the response is sent."""

    def lines() -> Iterator[str]:
        writer = csv.writer(_Echo())
        yield writer.writerow([csv_cell(name) for name in header])
        for row in rows:
            yield writer.writerow([csv_cell(cell) for cell in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
