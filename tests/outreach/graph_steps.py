"""Steps of sequences that react, as requests give them (API.md 17)."""


def email(key=None, subject="", body="Hi {{first_name|there}}", **more):
    step = {"subject": subject, "body_text": body, **more}
    if key:
        step["key"] = key
    return step


def branch(key, on="opened", then="end", otherwise="end", **condition):
    return {
        "key": key,
        "branch": {"on": on, "within_minutes": 4320, **condition},
        "then": then,
        "else": otherwise,
    }


# The docs' example (docs/outreach.md, "Sequences that react").
THREE_WAYS = [
    email("intro", subject="Quick question", delay_minutes=0),
    branch("opened_intro", then="pricing", otherwise="bump", of="intro"),
    email("pricing", body="Here is our pricing.", delay_minutes=60, next="clicked_pricing"),
    branch("clicked_pricing", on="clicked", then="case_study", otherwise="end"),
    email("case_study", body="A case study.", delay_minutes=1440, next="end"),
    email("bump", body="Bumping this up.", delay_minutes=1440, next="end"),
]
