import pytest

from tests.conftest import plan_catalog_ensure


@pytest.fixture
def live_db(transactional_db):
    """Committed rows other threads and processes can see, on top of the catalog
    (the flush after a transactional test removes the data migration's rows)."""
    plan_catalog_ensure()
