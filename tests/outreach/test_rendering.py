"""Personalisation: substitution only, validated at save time, escaped in HTML."""

from types import SimpleNamespace

import pytest

from outreach.campaigns.rendering import contact_values, template_errors, template_render

CONTACT = SimpleNamespace(
    first_name="Ada",
    last_name="Lovelace",
    company="<Analytical & Co>",
    email="ada@example.org",
    fields={"job_title": "Countess", "city": ""},
)


@pytest.mark.parametrize(
    "text",
    [
        "Hi {{first_name}}",
        "Hi {{ first_name }} {{last_name}} of {{company}} <{{email}}>",
        "{{fields.job_title}} {{fields.some-thing_2}}",
        "{{first_name|there}} {{ company | your team }}",
        "no variables at all, { single braces } are fine",
    ],
)
def test_valid_templates_have_no_errors(text):
    assert template_errors(text) == []


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Hi {{firstname}}", "Unknown variable {{firstname}}"),
        ("{{fields.}}", "Unknown variable {{fields.}}"),
        ("{{fields.a b}}", "Unknown variable {{fields.a b}}"),
        ("{{}}", "Unknown variable {{}}"),
        ("{{ system.exit }}", "Unknown variable {{system.exit}}"),
        ("Hi {{first_name", "Unbalanced braces"),
        ("Hi first_name}}", "Unbalanced braces"),
        ("{% if x %}{{first_name}}", None),
    ],
)
def test_invalid_templates_are_reported(text, fragment):
    errors = template_errors(text)
    if fragment is None:
        # Template tags are not syntax here: they stay literal text, nothing runs.
        assert errors == []
        assert template_render(text, contact_values(CONTACT)) == "{% if x %}Ada"
    else:
        assert any(fragment in error for error in errors), errors


def test_render_substitutes_values_and_fallbacks():
    values = contact_values(CONTACT)
    assert (
        template_render("Hi {{first_name}} {{last_name}} ({{fields.job_title}}), {{email}}", values)
        == "Hi Ada Lovelace (Countess), ada@example.org"
    )
    assert (
        template_render("{{fields.city|somewhere}} {{fields.missing|x}}", values) == "somewhere x"
    )
    assert template_render("{{fields.missing}}!", values) == "!"


def test_fallback_only_when_empty():
    empty = SimpleNamespace(first_name=" ", last_name="", company="", email="a@b.c", fields={})
    assert template_render("Hi {{first_name|there}}", contact_values(empty)) == "Hi there"
    assert template_render("Hi {{first_name|there}}", contact_values(CONTACT)) == "Hi Ada"


def test_html_bodies_escape_values_but_not_the_template():
    rendered = template_render("<p>{{company}}</p>", contact_values(CONTACT), kind="html")
    assert rendered == "<p>&lt;Analytical &amp; Co&gt;</p>"
    assert template_render("{{company}}", contact_values(CONTACT)) == "<Analytical & Co>"


def test_values_are_not_templates_themselves():
    sneaky = SimpleNamespace(
        first_name="{{email}}", last_name="", company="", email="x@y.z", fields={}
    )
    assert template_render("Hi {{first_name}}", contact_values(sneaky)) == "Hi {{email}}"


def test_header_kind_cannot_inject_lines():
    evil = SimpleNamespace(
        first_name="Ada\r\nBcc: victim@example.org",
        last_name="",
        company="",
        email="a@b.c",
        fields={},
    )
    subject = template_render("Hello {{first_name}}", contact_values(evil), kind="header")
    assert "\n" not in subject and "\r" not in subject
    assert subject == "Hello Ada Bcc: victim@example.org"
