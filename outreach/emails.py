"""Email address validation shared by the API, imports and outreaches."""

from email_validator import EmailNotValidError, validate_email


class InvalidEmail(ValueError):
    pass


def email_clean(value: object) -> str:
    """The address, syntax-checked (no DNS lookup) with its domain normalised to lower
    case and internationalised domains to their Unicode form; InvalidEmail otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidEmail("An email address is required.")
    try:
        result = validate_email(value.strip(), check_deliverability=False)
    except EmailNotValidError as exc:
        raise InvalidEmail(str(exc)) from None
    if len(result.normalized) > 254:
        raise InvalidEmail("The email address is longer than 254 characters.")
    return result.normalized
