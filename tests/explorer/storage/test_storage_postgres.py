"""The PostgreSQL store against a real server of the tests' own (``postgres_server``): the
shipped contract unchanged, PostgreSQL specifics, errors as sentences, several processes writing,
live subscriptions, and whole databases moved between SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from explorer.storage import PostgresStore
from explorer.testing.contracts import RecordStoreContract


class TestPostgres(RecordStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self, pg_url: str) -> None:
        self.url = pg_url  # a new empty database for each test

    def make_store(self, directory):
        return PostgresStore(self.url)
