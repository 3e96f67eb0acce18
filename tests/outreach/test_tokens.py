import uuid

from outreach.sending.tokens import OPEN, UNSUBSCRIBE, token_make, token_read


def test_a_token_reads_back_its_enrollment():
    enrollment_id = uuid.uuid4()
    token = token_make(purpose=OPEN, enrollment_id=enrollment_id)
    assert token_read(purpose=OPEN, token=token) == enrollment_id


def test_tokens_are_url_safe():
    token = token_make(purpose=UNSUBSCRIBE, enrollment_id=uuid.uuid4())
    assert all(c.isalnum() or c in "-_." for c in token)


def test_a_tampered_token_reads_as_nothing():
    token = token_make(purpose=OPEN, enrollment_id=uuid.uuid4())
    other = uuid.uuid4().hex
    assert token_read(purpose=OPEN, token=other + token[32:]) is None
    assert token_read(purpose=OPEN, token=token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert token_read(purpose=OPEN, token="garbage") is None
    assert token_read(purpose=OPEN, token="") is None


def test_a_token_is_only_good_for_its_purpose():
    token = token_make(purpose=OPEN, enrollment_id=uuid.uuid4())
    assert token_read(purpose=UNSUBSCRIBE, token=token) is None
