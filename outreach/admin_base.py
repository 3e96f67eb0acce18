"""What the outreach admin pages share besides their base (config.admin_base): HTML tables."""

from django.utils.html import format_html, format_html_join


def html_table(headers, rows) -> str:
    """A read-only table shown as a field (not an inline), so saving the editable
    attributes of its page never needs a formset."""
    if not rows:
        return "none"
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((c,) for c in r)),) for r in rows)
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)
