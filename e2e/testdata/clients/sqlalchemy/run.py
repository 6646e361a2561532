"""SQLAlchemy with sqlalchemy-libsql against sluice (sqlite+libsql://HOST/db/NAME/)
or a local file (sqlite+libsql:///PATH): create_all twice, ORM writes and
queries, and reflection of what create_all made."""
import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sqlalchemy import (Boolean, DateTime, ForeignKey, Integer, Numeric, String, Text,  # noqa: E402
                        create_engine, func, inspect, select, text)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship  # noqa: E402

from common import Recorder  # noqa: E402


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "author"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(50), unique=True, nullable=False)
    joined: Mapped[datetime.datetime] = mapped_column(DateTime, nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    books: Mapped[list["Book"]] = relationship(back_populates="author", cascade="all, delete-orphan")


class Book(Base):
    __tablename__ = "book"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(Text, index=True)
    price: Mapped[float] = mapped_column(Numeric(10, 2), nullable=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("author.id", ondelete="CASCADE"))
    author: Mapped[Author] = relationship(back_populates="books")


def url():
    if os.environ["DB_KIND"] == "local":
        return "sqlite+libsql:///" + os.environ["DB_FILE"]
    return "sqlite+libsql://%s/db/%s/?secure=false" % (os.environ["DB_HOST"], os.environ["DB_NAME"])


def main():
    r = Recorder()
    engine = create_engine(url())
    r.step("create_all", lambda: Base.metadata.create_all(engine))
    r.step("create_all again", lambda: Base.metadata.create_all(engine))

    def write():
        with Session(engine) as s:
            s.execute(text("DELETE FROM book"))
            s.execute(text("DELETE FROM author"))
            a = Author(name="Le Guin", joined=datetime.datetime(2024, 5, 6, 7, 8, 9), active=True)
            a.books = [Book(title="The Dispossessed", price=12.5), Book(title="Lathe of Heaven", price=None)]
            s.add(a)
            s.commit()
            return a.id is not None

    r.step("orm insert", write)

    def read():
        with Session(engine) as s:
            a = s.scalars(select(Author).where(Author.name == "Le Guin")).one()
            books = s.execute(select(Book.title, Book.price, Author.name).join(Author).order_by(Book.title)).all()
            n = s.scalar(select(func.count()).select_from(Book))
            return {"joined": a.joined, "active": a.active, "books": [[t, str(p), n] for t, p, n in books], "count": n}

    r.step("orm select", read)

    def duplicate():
        with Session(engine) as s:
            s.add(Author(name="Le Guin", joined=datetime.datetime(2024, 1, 1)))
            s.commit()

    r.step("unique violation", duplicate)

    def reflect():
        insp = inspect(engine)
        out = {"tables": insp.get_table_names()}
        for t in out["tables"]:
            out[t] = {
                "columns": [[c["name"], str(c["type"]), c["nullable"], c["primary_key"]] for c in insp.get_columns(t)],
                "fks": [[fk["constrained_columns"], fk["referred_table"], fk["referred_columns"], fk.get("options", {})] for fk in insp.get_foreign_keys(t)],
                "indexes": sorted([[i["name"], i["column_names"], bool(i["unique"])] for i in insp.get_indexes(t)]),
                "unique": sorted([[u["name"] or "", u["column_names"]] for u in insp.get_unique_constraints(t)]),
                "pk": insp.get_pk_constraint(t)["constrained_columns"],
            }
        return out

    r.step("reflection", reflect)
    engine.dispose()


main()
