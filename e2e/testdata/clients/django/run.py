"""Django with the django-libsql backend (over libsql-client's DB-API) on
DB_WS_URL, sluice's ws:// URL, or Django's own sqlite3 backend on the local
file DB_FILE (django-libsql cannot open a local file: its cursor wrapper
refuses the sqlite3 connection libsql-client returns for one): migrate in two
steps, then again (nothing to apply), and a model round trip with a foreign
key, a transaction and a unique violation."""
import datetime
import decimal
import io
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, ".."))

import django  # noqa: E402
from django.conf import settings  # noqa: E402

if os.environ["DB_KIND"] == "sluice":
    database = {"ENGINE": "libsql.db.backends.libsql", "NAME": os.environ["DB_WS_URL"]}
else:
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["DB_FILE"]}
settings.configure(
    INSTALLED_APPS=["notes"],
    DATABASES={"default": database},
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    USE_TZ=True,
)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402

from common import Recorder, error_text  # noqa: E402
from notes.models import Author, Book  # noqa: E402


def migrate(*args):
    out = io.StringIO()
    call_command("migrate", "notes", *args, verbosity=1, interactive=False, stdout=out)
    return [line.strip() for line in out.getvalue().splitlines() if line.strip().startswith(("Applying", "No migrations"))]


def books():
    return [[b.title, b.author.name, str(b.published), str(b.price), b.pages, b.tags]
            for b in Book.objects.select_related("author").order_by("title")]


def round_trip():
    a, _ = Author.objects.get_or_create(name="Ursula")
    Book.objects.create(title="Run %s" % os.environ["RUN"], author=a, published=datetime.date(1969, 3, 1),
                        price=decimal.Decimal("12.50"), tags=["sf", {"n": 1}])
    return books()


def rolled_back():
    try:
        with transaction.atomic():
            a = Author.objects.create(name="Temporary")
            Book.objects.create(title="never", author=a)
            raise RuntimeError("abandon")
    except RuntimeError:
        pass
    return [Author.objects.filter(name="Temporary").count(), Book.objects.filter(title="never").count()]


def duplicate():
    try:
        with transaction.atomic():
            Author.objects.create(name="Ursula")
    except IntegrityError as e:
        return "IntegrityError: " + error_text(e)
    return "no error"


def cascade():
    a = Author.objects.create(name="Gone %s" % os.environ["RUN"])
    Book.objects.create(title="orphan?", author=a)
    a.delete()
    return Book.objects.filter(title="orphan?").count()


r = Recorder()
if os.environ["RUN"] == "1":
    r.step("migrate to 0001", lambda: migrate("0001"))
    # Rows written at 0001's schema (the model is already at 0002's), which
    # 0002's table rebuild must keep, with their author.
    r.step("rows before 0002", lambda: (
        connection.cursor().execute("INSERT INTO notes_author (name) VALUES ('Le Guin')"),
        connection.cursor().execute("INSERT INTO notes_book (title, published, price, tags, author_id) "
                                    "SELECT 'Before the rebuild', '1968-01-01', '9.99', '[]', id FROM notes_author"),
        connection.cursor().execute("SELECT count(*) FROM notes_book").fetchone()[0])[-1])
r.step("migrate", lambda: migrate())
r.step("migrate again", lambda: migrate())
r.step("round trip", round_trip)
r.step("atomic rolled back", rolled_back)
r.step("unique violation", duplicate)
r.step("delete cascades", cascade)
r.step("related", lambda: sorted(b.title for b in Author.objects.get(name="Ursula").books.all()))
r.step("filter and aggregate", lambda: [Book.objects.filter(price__gt=decimal.Decimal("10")).count(),
                                        str(Book.objects.filter(pages=0).count())])
r.step("foreign keys on", lambda: connection.cursor().execute("PRAGMA foreign_keys").fetchone()[0])
connection.close()
