"""Database URLs as they may be shown: ``postgresql://me:***@host/db``, never the password.

A URL given with ``--db`` or ``$EXPLORER_DB`` can hold a password (in its user part or as a
``password=`` parameter). Every message, log line, stored setting and printed command shows the
URL through ``redact``. Kept apart from the store (no psycopg, no database) so that the
command line's argument checks can use it too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

URL_SCHEMES = ("postgresql://", "postgres://")
_QUERY_PASSWORD = re.compile(r"(?i)((?:^|&)password=)[^&]*")


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://...``)."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; anything that is not a database
    URL is returned as it is.

    Example:
        >>> redact("postgresql://me:secret@db-host:5432/records?password=again&sslmode=require")
        'postgresql://me:***@db-host:5432/records?password=***&sslmode=require'
    """
    if not is_postgres_url(url):
        return url
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            netloc = parts.netloc.rsplit("@", 1)[1]
            parts = parts._replace(netloc=f"{parts.username}:***@{netloc}")
        return urlunsplit(parts._replace(query=_QUERY_PASSWORD.sub(r"\1***", parts.query)))
    except ValueError:  # not even a URL: show where it points, not who logs in how
        return url.split("://", 1)[0] + "://" + url.rsplit("@", 1)[-1] if "@" in url else url
