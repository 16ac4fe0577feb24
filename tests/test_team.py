"""A team store on a real PostgreSQL (tests/postgres.py): members on separate machines
(separate cache directories) share notes, catch up from the journal, never skip a
committed event, and never see a credential."""

import os
import re
import threading
from pathlib import Path

import psycopg
import pytest
from IPython.utils.capture import capture_output

from nbmemory.address import Address
from nbmemory.display import status_display
from nbmemory.embed import HashEmbedder
from nbmemory.errors import Conflict, InvalidInput, StoreUnavailable, StoreUnreachable
from nbmemory.memory import Memory
from nbmemory.models import Provenance
from nbmemory.store.postgres import PostgresStore
from nbmemory.store import schema
from cosines import shown_dense
from waiting import wait_for


class Member:
    """A team member on a machine of their own: their own cache directory, and each call
    made as their JupyterHub user (as their own kernel would be)."""

    def __init__(self, url, cache):
        self.name = cache.name
        self.memory = Memory.open(url, embedder=HashEmbedder())

    def __getattr__(self, operation):
        function = getattr(self.memory, operation)

        def call(*args, **kwargs):
            os.environ["JUPYTERHUB_USER"] = self.name
            return function(*args, **kwargs)
        return call

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.memory.close()


def member(url, tmp_path, monkeypatch, name):
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / f"cache-{name}"))
    monkeypatch.setenv("JUPYTERHUB_USER", name)
    return Member(url, tmp_path / name)


@pytest.fixture
def ada_and_bo(team_url, tmp_path, monkeypatch):
    ada = member(team_url, tmp_path, monkeypatch, "ada")
    bo = member(team_url, tmp_path, monkeypatch, "bo")
    yield ada, bo
    ada.close()
    bo.close()


def test_what_one_member_remembers_the_other_recalls_and_sees_change(ada_and_bo):
    ada, bo = ada_and_bo
    note = ada.remember("orders.amount is in cents before 2021", tags="orders")
    assert note.author == "ada"
    hits = bo.recall("orders amount cents")
    assert [h.note.id for h in hits] == [note.id]
    assert bo.recall("amount in cents", mode="lexical")[0].note.id == note.id
    assert bo.recall("amount in cents", mode="dense")[0].note.id == note.id

    edited = bo.edit(note.id, text="orders.amount is in cents before 2021-03")
    assert (edited.version, edited.author) == (2, "ada")  # still ada's note; v2 is bo's
    assert [v.author for v in ada.versions(note.id)] == ["ada", "bo"]
    assert ada.get(note.id).text.endswith("2021-03")
    assert [e.actor for e in ada.history(note.id)] == ["ada", "bo"]

    bo.forget(note.id)
    assert ada.recall("orders amount cents", min_score=0) == []
    assert [n.id for n in ada.notes().notes] == []
    assert ada.status()["journal_position"] == bo.status()["journal_position"] == 3


def test_a_member_opening_later_gets_every_vector_without_embedding(team_url, tmp_path, monkeypatch):
    ada = member(team_url, tmp_path, monkeypatch, "ada")
    ids = [ada.remember(f"finding {i} about the nightly export").id for i in range(20)]
    ada.close()

    class Counting(HashEmbedder):
        encoded = 0

        def encode(self, texts):
            Counting.encoded += len(texts)
            return super().encode(texts)

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache-cy"))
    with Memory.open(team_url, embedder=Counting()) as cy:
        assert cy.status()["vectors"] == 20
        assert Counting.encoded == 0
        assert cy.recall("finding 7 nightly export", k=1)[0].note.id == ids[7]


def test_concurrent_members_never_lose_or_skip_a_note(team_url, tmp_path, monkeypatch):
    members = [member(team_url, tmp_path, monkeypatch, f"m{i}") for i in range(4)]
    errors = []

    def write(mem, who):
        try:
            for i in range(15):
                mem.memory.remember(f"{who} found thing {i} in the ledger", author=who)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(m, f"m{i}")) for i, m in enumerate(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for mem in members:
        status = mem.status()
        assert (status["notes"], status["vectors"], status["lexical_docs"]) == (60, 60, 60)
        assert status["journal_position"] == 60
    events = members[0].memory._backend.engine.store.events()
    assert [e.seq for e in events] == list(range(1, 61))
    assert sorted({e.actor for e in events}) == ["m0", "m1", "m2", "m3"]
    for mem in members:
        mem.close()


def test_a_later_position_is_never_visible_before_an_earlier_one(team_url):
    """The trap: positions 10 and 11 taken, 11 commits first, a reader moves past 10."""
    address = Address.parse(team_url)
    first, second, reader = (PostgresStore(address) for _ in range(3))
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc)
    holding, release, done = threading.Event(), threading.Event(), []

    def slow():
        with first.transaction():
            done.append(("first", first.append_event("note", None, actor="a", at=now)))
            holding.set()
            release.wait(30)

    def fast():
        with second.transaction():  # waits for the first transaction's lock
            done.append(("second", second.append_event("note", None, actor="b", at=now)))

    a = threading.Thread(target=slow)
    a.start()
    holding.wait(30)
    b = threading.Thread(target=fast)
    b.start()
    wait_for(lambda: reader.con.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database()").fetchone()[0] == 1, what="the second writer waiting")
    assert reader.position() == 0 and done == [("first", 1)]
    release.set()
    a.join()
    b.join()
    assert done == [("first", 1), ("second", 2)]
    assert [e.seq for e in reader.events()] == [1, 2]
    for store in (first, second, reader):
        store.close()


def test_an_address_with_a_password_is_refused(team_url):
    url = team_url.replace("postgres@", "postgres:hunter2@")
    with pytest.raises(InvalidInput, match="holds a password; nbmemory never keeps credentials"):
        Memory.open(url, embedder=HashEmbedder())
    with pytest.raises(InvalidInput, match=r"password=\.\.\.\); nbmemory never keeps"):
        Memory.open(team_url + "&password=hunter2", embedder=HashEmbedder())


def test_several_team_stores_live_in_one_database(team_url, tmp_path, monkeypatch):
    with Memory.open(team_url + "&store=ml", embedder=HashEmbedder()) as ml:
        ml.remember("the churn model is retrained on Mondays")
    with Memory.open(team_url + "&store=finance", embedder=HashEmbedder()) as finance:
        assert finance.notes().total == 0
        finance.remember("invoices are booked in EUR")
    with Memory.open(team_url + "&store=ml", embedder=HashEmbedder()) as ml:
        assert [n.text for n in ml.notes().notes] == ["the churn model is retrained on Mondays"]
    with pytest.raises(InvalidInput, match="team store name 'Bad-Name' is not usable"):
        Memory.open(team_url + "&store=Bad-Name", embedder=HashEmbedder())


def test_a_local_store_moves_to_the_team_store_and_back_keeping_ids_and_history(
        team_url, tmp_path, monkeypatch):
    with Memory.open(tmp_path / "mine", embedder=HashEmbedder()) as mine:
        first = mine.remember("the lock is taken in watcher.py", tags="locks")
        mine.edit(first.id, text="the lock is taken in watcher.py:42")
        mine.remember("retries back off exponentially")
        mine.snapshot("before-sharing")
        mine.export_jsonl(tmp_path / "mine.jsonl")
    with member(team_url, tmp_path, monkeypatch, "ada") as team:
        assert team.import_jsonl(tmp_path / "mine.jsonl")["restored"] == 2
        assert team.get(first.id).text == "the lock is taken in watcher.py:42"
        assert [e.type for e in team.history(first.id)] == ["created", "edited"]
        assert [s.name for s in team.snapshots()] == ["before-sharing"]
        team.remember("the team agreed to store amounts in cents")
        team.export_jsonl(tmp_path / "team.jsonl")
    with Memory.open(tmp_path / "back", embedder=HashEmbedder()) as back:
        assert back.import_jsonl(tmp_path / "team.jsonl")["restored"] == 3
        assert back.get(first.id).version == 2
        assert back.recall("amounts in cents")[0].note.author == "ada"


def test_the_team_store_through_the_owner_process(team_url, tmp_path, monkeypatch):
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    with Memory.open(team_url, model="hash:64", mode="service") as mem:
        note = mem.remember("the export moved to Airflow in May")
        status = mem.status()
        assert status["store"] == team_url
        assert mem.recall("export Airflow")[0].note.id == note.id


def test_members_opening_a_new_team_store_at_the_same_moment_all_open_it(postgres_server):
    """Each open creates the schema if it is missing: two at once raced to create it."""
    for _ in range(3):
        address = Address.parse(postgres_server.url(postgres_server.new_database()))
        start, opened, failed = threading.Barrier(6), [], []

        def open_store():
            start.wait()
            try:
                opened.append(PostgresStore(address))
            except Exception as exc:  # noqa: BLE001 - the failure is the finding
                failed.append(exc)

        threads = [threading.Thread(target=open_store) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failed and len(opened) == 6
        for store in opened:
            store.close()


def test_migrations_are_applied_once_and_a_newer_store_is_refused(team_url):
    address = Address.parse(team_url)
    PostgresStore(address).close()
    store = PostgresStore(address)  # a second open applies nothing
    assert store.con.execute("SELECT count(*) FROM migrations").fetchone()[0] == len(schema.MIGRATIONS)
    store.con.execute("INSERT INTO migrations VALUES ('m999_future', now())")
    store.close()
    from nbmemory.errors import StoreTooNew

    with pytest.raises(StoreTooNew, match="written by a newer nbmemory .*m999_future"):
        PostgresStore(address)
    with psycopg.connect(address.conninfo) as con:
        assert con.execute("SELECT count(*) FROM nbmemory.notes").fetchone()[0] == 0


def test_a_store_a_newer_nbmemory_migrated_while_open_takes_no_more_writes(team_url, tmp_path):
    """A member upgraded: an owner opened before (they idle for 30 minutes) stops writing
    with the old schema's code, and says so."""
    from nbmemory.errors import StoreTooNew

    with Memory.open(team_url, embedder=HashEmbedder()) as mem:
        mem.remember("written before the upgrade")
        with psycopg.connect(Address.parse(team_url).conninfo, autocommit=True) as admin:
            admin.execute("INSERT INTO nbmemory.migrations VALUES ('m999_future', now())")
        with pytest.raises(StoreTooNew, match="written by a newer nbmemory .*m999_future"):
            mem.remember("written after it")
        assert [n.text for n in mem.notes().notes] == ["written before the upgrade"]


def test_a_server_restart_mid_use_is_retried_and_applies_each_write_once(
        team_url, postgres_server, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    with Memory.open(team_url, model="hash:64", mode="service") as mem:
        first = mem.remember("the export moved to Airflow in May")
        postgres_server.stop("immediate")  # like kill -9 of the postmaster
        results, said = [], []

        def write():
            results.append(mem.remember("the backfill runs on Sundays"))

        writer = threading.Thread(target=write)
        try:
            writer.start()
            wait_for(lambda: said.append(capfd.readouterr().err) or "unreachable" in "".join(said),
                     what="the client saying the team store is unreachable")
        finally:
            postgres_server.start()
        writer.join(60)
        assert "the team store is unreachable; retrying remember" in "".join(said)
        assert [n.text for n in mem.notes(order="oldest").notes] == [
            first.text, "the backfill runs on Sundays"]
        assert results[0].id == 2
        assert mem.recall("backfill Sundays")[0].note.id == 2


def test_a_write_that_a_colleague_overtook_is_refused_not_applied(ada_and_bo, team_url):
    """Each write checks the note inside its transaction, under the store's lock: an edit
    that a colleague's forget (or edit) overtook is refused instead of landing on a
    forgotten note (or undoing the other edit)."""
    ada, bo = ada_and_bo
    first = ada.remember("the feed refreshes hourly")
    second = ada.remember("the feed keeps 30 days")
    admin = psycopg.connect(Address.parse(team_url).conninfo, autocommit=True)

    def waiting() -> int:
        return admin.execute("SELECT count(*) FROM pg_stat_activity "
                             "WHERE wait_event_type = 'Lock'").fetchone()[0]

    def overtaken(earlier, later):
        """Run ``earlier`` then ``later``, each stopped at the store's lock, in that order."""
        results = {}

        def run(name, call):
            try:
                results[name] = call()
            except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
                results[name] = exc
        admin.execute("SELECT pg_advisory_lock(hashtext('nbmemory:nbmemory'))")
        threads = []
        for count, (name, call) in enumerate((earlier, later), 1):
            threads.append(threading.Thread(target=run, args=(name, call)))
            threads[-1].start()
            wait_for(lambda: waiting() == count, what=f"{name} to wait for the lock")
        admin.execute("SELECT pg_advisory_unlock(hashtext('nbmemory:nbmemory'))")
        for thread in threads:
            thread.join(timeout=60)
        return results

    done = overtaken(("forget", lambda: bo.forget(first.id, actor="bo")),
                     ("edit", lambda: ada.edit(first.id, text="hourly, at :05", author="ada")))
    assert not isinstance(done["forget"], Exception)
    assert isinstance(done["edit"], Conflict)
    assert str(done["edit"]).startswith(f"Cannot edit note #{first.id}: it is forgotten (revoked)")
    assert [e.type for e in ada.history(first.id)] == ["created", "revoked"]

    done = overtaken(("bo", lambda: bo.edit(second.id, priority="high", author="bo")),
                     ("ada", lambda: ada.edit(second.id, text="30 days, then S3", author="ada")))
    assert done["bo"].version == 2 and done["bo"].priority == "high"
    assert str(done["ada"]) == (
        f"Note #{second.id} was edited by bo while this edit was written (it is version 2 "
        "now); nothing was written. Read it again, then edit it.")
    assert ada.get(second.id).priority == "high"


def test_an_export_edited_by_hand_is_refused_by_the_team_store_too(team_url, tmp_path):
    """A row PostgreSQL's schema refuses is the same clear refusal as DuckDB's, not an
    owner failure; nothing is imported."""
    import json

    with Memory.open(tmp_path / "mine", embedder=HashEmbedder()) as mine:
        mine.remember("exports are gzipped")
        mine.remember("the feed keeps 30 days")
        mine.export_jsonl(tmp_path / "e.jsonl")
    lines = []
    for line in (tmp_path / "e.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("table") == "notes" and record["row"]["id"] == 2:
            record["row"]["uid"] = None
        lines.append(json.dumps(record))
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with Memory.open(team_url, embedder=HashEmbedder()) as team:
        team.remember("a note of the team's")
        with pytest.raises(InvalidInput, match="has a row this store cannot take "
                                               r"\(NotNullViolation: .*Nothing was imported"):
            team.import_jsonl(tmp_path / "bad.jsonl")
        assert [n.text for n in team.notes().notes] == ["a note of the team's"]


def test_an_address_the_server_refuses_is_said_at_once_not_retried(postgres_server,
                                                                   tmp_path, monkeypatch):
    """A wrong database, role or password will not work on the next attempt either: the
    error says so right away (a server that is down is retried, as before)."""
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    for url, said in ((postgres_server.url("nosuchdb"), 'database "nosuchdb" does not exist'),
                      (postgres_server.url().replace("postgres@", "nobody@"),
                       'role "nobody" does not exist'),
                      (postgres_server.url(sslmode="bogus"), 'invalid sslmode value')):
        with pytest.raises(StoreUnavailable) as refused:
            Memory.open(url, embedder=HashEmbedder())
        assert not isinstance(refused.value, StoreUnreachable), url
        assert str(refused.value).startswith(f"The team store {url} refused this connection (")
        assert said in str(refused.value)
    mistyped = postgres_server.url(sslmod="require")  # libpq cannot read it: no retry either
    with pytest.raises(StoreUnavailable) as refused:
        Memory.open(mistyped, embedder=HashEmbedder())
    assert not isinstance(refused.value, StoreUnreachable)
    assert str(refused.value) == (
        f"The team store address {mistyped} is not one PostgreSQL can use (invalid URI query "
        f'parameter: "sslmod"). Check the address (docs/team.md shows its forms).')


def test_no_password_to_send_is_a_refusal_not_a_server_away():
    from nbmemory.store.postgres import refused_connection

    assert refused_connection('connection failed: connection to server at "127.0.0.1", port '
                              '5432 failed: fe_sendauth: no password supplied')
    assert not refused_connection('connection failed: connection to server at "127.0.0.1", '
                                  'port 5432 failed: Connection refused')


def test_a_server_away_at_the_owners_start_is_said_once_and_named_at_the_end(
        tmp_path, monkeypatch, capsys):
    """Owners are started again while a team store's server is away; the wait says so once
    and ends with the server's own error, not with the owner's cache directory. With no
    copy of the notes to serve, it ends after a short wait, not the resend window."""
    import socket

    from nbmemory.config import locate_store
    from nbmemory.service import client
    from nbmemory.service.client import ServiceBackend

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(client, "NO_COPY_PATIENCE_S", 1.0)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://nobody@127.0.0.1:{port}/analytics"
    said = []
    backend = ServiceBackend(locate_store(url).path, model="hash:64", startup_timeout=120,
                             resend_timeout=120, announce=said.append)
    with pytest.raises(StoreUnreachable) as caught:
        backend.ensure_owner()
    assert str(caught.value).startswith(f"The team store {url} is unreachable (")
    assert "Connection refused" in str(caught.value)
    assert "This machine has no copy of its notes to read meanwhile" in str(caught.value)
    assert str(caught.value).count("(details: ") == 1
    waited = int(str(caught.value).rsplit("(still unreachable after ", 1)[1].split(" s)")[0])
    assert waited < 10  # the copy-less patience, not the resend window (120 s)
    assert len(said) == 1 and said[0].startswith("starting the memory service for ")
    assert capsys.readouterr().err.count("the team store is unreachable; starting its owner "
                                         "again for up to 1 s") == 1
    backend.close()


def open_as_role(admin, team_url: str, name: str, privileges: str, tmp_path, monkeypatch):
    """The store opened as a new PostgreSQL role ``name`` with ``privileges`` on its tables
    (not their owner, not a superuser), with a cache directory of its own."""
    admin.execute(f"CREATE ROLE {name} LOGIN")
    admin.execute(f"GRANT USAGE ON SCHEMA nbmemory TO {name}")
    admin.execute(f"GRANT {privileges} ON ALL TABLES IN SCHEMA nbmemory TO {name}")
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / f"cache-{name}"))
    return Memory.open(team_url.replace("postgres@", f"{name}@"), embedder=HashEmbedder())


def test_purging_needs_the_tables_owner_and_says_so_before_erasing_anything(
        team_url, postgres_server, tmp_path, monkeypatch):
    """PostgreSQL skips VACUUM FULL for a role that does not own a table (a warning, no
    error), which would leave a purged text in the server's files: refused up front, and
    allowed once the tables belong to a role the member is in (docs/team.md's recipe)."""
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the vendor api key is rotated monthly")
    admin = psycopg.connect(Address.parse(team_url).conninfo, autocommit=True)
    with open_as_role(admin, team_url, "bo", "SELECT, INSERT, UPDATE, DELETE",
                      tmp_path, monkeypatch) as bo:
        with pytest.raises(Conflict) as refused:
            bo.purge(1)
        assert str(refused.value) == (
            "Only the owner of the team store's tables (postgres) can purge: PostgreSQL lets "
            "only a table's owner rewrite it, and without that the text of #1 would stay in "
            "the server's files. Nothing was changed. Ask postgres to purge it, or give the "
            "tables to a role you are a member of (docs/team.md, Permissions).")
        assert bo.get(1).text == "the vendor api key is rotated monthly"
        admin.execute("CREATE ROLE analysts")
        admin.execute("GRANT analysts TO bo")
        for (table,) in admin.execute("SELECT tablename FROM pg_tables "
                                      "WHERE schemaname = 'nbmemory'").fetchall():
            admin.execute(f"ALTER TABLE nbmemory.{table} OWNER TO analysts")
        assert bo.purge(1).status == "purged"
    texts = admin.execute("SELECT count(*) FROM nbmemory.note_versions "
                          "WHERE text LIKE '%api key%'").fetchone()[0]
    admin.close()
    assert texts == 0


def test_trust_in_a_check_is_each_members_own_on_their_machine(
        team_url, tmp_path, monkeypatch):
    """A check is code a member's kernel runs once they trust it. Kept in the store, under
    the name a member gives (JUPYTERHUB_USER), a trust could be written by any member for
    another; and it covered the note, so a check's row rewritten under it ran new code.
    Trust is now kept on each member's machine, for the checks as they read."""
    ada = member(team_url, tmp_path, monkeypatch, "ada")
    bo = member(team_url, tmp_path, monkeypatch, "bo")
    note = bo.remember("two is one and one", check="1 + 1 == 2", namespace={})
    assert [i["trusted"] for i in bo.checks()] == [True]  # who writes a check trusts it
    bo.trust(note.id, actor="ada")  # bo trusting it for ada (a name anyone may give)
    assert [(i["expression"], i["trusted"]) for i in ada.checks()] == [("1 + 1 == 2", False)]
    [(_, outcome)] = ada.check({})
    assert (outcome.status, outcome.why) == ("skipped", "not trusted: written by bo")
    ada.trust(note.id)
    assert ada.check({})[0][1].status == "passed"
    with psycopg.connect(Address.parse(team_url).conninfo) as con:  # a member's own SQL
        con.execute("UPDATE nbmemory.anchors SET target = '__import__(\"os\").getpid() > 0' "
                    "WHERE note_id = %s AND kind = 'check'", [note.id])
    ada.close()
    ada = member(team_url, tmp_path, monkeypatch, "ada")  # reads the rows afresh
    assert [(i["expression"], i["trusted"]) for i in ada.checks()] == [
        ('__import__("os").getpid() > 0', False)]
    assert ada.check({})[0][1].status == "skipped"
    ada.close()
    bo.close()
    kept = list((tmp_path / "cache-ada").rglob("trusted.json"))  # hashes, not checks' text
    assert kept and all("1 + 1" not in path.read_text() for path in kept)


def test_a_trust_covers_what_was_read_and_every_check_it_names(team_url, tmp_path, monkeypatch):
    """Found by review: trust() trusted the note's checks as they were when it ran, and
    %memory trust named only one of a note's checks while it trusted them all."""
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    ada = member(team_url, tmp_path, monkeypatch, "ada")
    bo = member(team_url, tmp_path, monkeypatch, "bo")
    note = bo.remember("two is one and one", check="1 + 1 == 2", namespace={})
    with psycopg.connect(Address.parse(team_url).conninfo) as con:  # after ada read it
        con.execute("UPDATE nbmemory.anchors SET target = 'len(\"rm -rf\") > 0' "
                    "WHERE note_id = %s AND kind = 'check'", [note.id])
    with pytest.raises(Conflict, match=r"^Note #1 has no check '1 \+ 1 == 2' any more: it "
                                       r"changed since it was read\. .* Nothing was trusted\.$"):
        ada.trust(note.id, checks=["1 + 1 == 2"])
    assert [i["trusted"] for i in ada.checks()] == [False]
    engine = bo.memory._backend.engine  # the row was changed behind the journal's back
    engine.store.forget_cached([note.id])
    bo_reads = bo.checks()  # bo trusted the check bo wrote, as it read then
    assert [(i["trusted"], i["trusted_before"]) for i in bo_reads] == [(False, True)]
    [(_, outcome)] = bo.check({}, [note.id])  # not "written by": bo wrote it
    assert outcome.why == ("not trusted as it reads now: you trusted this note's checks "
                           "before, not this one (it changed, or is new); read it, then "
                           "%memory trust 1")
    ada.close()
    shell = InteractiveShell.instance(history_length=0)
    try:
        shell.run_line_magic("load_ext", "nbmemory")
        magics = shell.magics_manager.registry["NbMemory"]
        monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache-cy"))  # cy's machine
        magics.store, magics._memory = team_url, Memory.open(team_url, embedder=HashEmbedder())
        os.environ["JUPYTERHUB_USER"] = "cy"
        with capture_output() as out:
            shell.run_line_magic("memory", f"trust {note.id}")
        assert out.stdout == (f'Trusted the check of #1: len("rm -rf") > 0. %memory check 1 '
                              "runs it.\n")  # said as it reads now, and only that trusted
        with pytest.raises(UsageError, match="has no check to trust"):
            shell.run_line_magic("memory", f"trust {bo.remember('no check').id}")
        magics._memory.close()
        magics._memory = None
    finally:
        InteractiveShell.clear_instance()
    bo.close()


def test_a_damaged_trust_file_is_moved_aside_not_written_over(ada_and_bo, tmp_path):
    ada, bo = ada_and_bo
    note = bo.remember("two is one and one", check="1 + 1 == 2", namespace={})
    ada.trust(note.id)
    [kept] = (tmp_path / "cache-ada").rglob("trusted.json")
    for damaged in ('{"ada": []}', '{"ada": {"'):  # not what nbmemory wrote; cut short
        kept.write_text(damaged)
        assert [i["trusted"] for i in ada.checks()] == [False]  # trusts nothing, raises not
        assert [p.read_text() for p in kept.parent.glob("trusted.json.damaged-*")] == [damaged]
        for aside in kept.parent.glob("trusted.json.damaged-*"):
            aside.unlink()
        ada.trust(note.id)
        assert [i["trusted"] for i in ada.checks()] == [True]


def test_a_trust_file_that_cannot_be_read_now_is_not_written_over(ada_and_bo, tmp_path,
                                                                  monkeypatch):
    """Found by review: a trust file unreadable for a moment (a permission error) read as
    none, and the next trust wrote over it with that trust alone: every other was lost."""
    ada, bo = ada_and_bo
    first = bo.remember("two is one and one", check="1 + 1 == 2", namespace={})
    second = bo.remember("four is two and two", check="2 + 2 == 4", namespace={})
    ada.trust(first.id)
    [kept] = (tmp_path / "cache-ada").rglob("trusted.json")
    before = kept.read_text()
    read = Path.read_text

    def denied(path, *args, **kwargs):
        if path == kept:
            raise PermissionError(13, "Permission denied", str(path))
        return read(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", denied)
    assert [i["trusted"] for i in ada.checks()] == [False, False]  # trusts nothing, raises not
    with pytest.raises(StoreUnavailable, match=rf"^Cannot read {re.escape(str(kept))} \(Permiss"
                       r"ion denied\), where this machine keeps your trusts: writing it now "
                       r"would lose them\. Nothing was trusted; make it readable, then trust "
                       r"again\.$"):
        ada.trust(second.id)
    monkeypatch.setattr(Path, "read_text", read)
    assert kept.read_text() == before
    assert [i["trusted"] for i in ada.checks()] == [False, True]  # newest first
    assert [(e.type, e.actor) for e in ada.history(second.id) if e.type == "trusted"] == [
        ("trusted", "bo")]  # the writer's own; ada's was not journalled either


def test_a_reader_without_write_grants_is_told_so_and_nothing_is_written(
        team_url, postgres_server, tmp_path, monkeypatch):
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the churn model is retrained on Mondays")
    admin = psycopg.connect(Address.parse(team_url).conninfo, autocommit=True)
    from nbmemory.errors import ReadOnlyStore

    with open_as_role(admin, team_url, "viewer", "SELECT", tmp_path, monkeypatch) as viewer:
        assert viewer.status()["read_only"] is True
        from nbmemory.display import status_display

        assert "read only: your PostgreSQL role may read this team store" in status_display(
            viewer.status()).text
        assert viewer.recall("churn model Mondays")[0].note.author == "ada"
        with pytest.raises(ReadOnlyStore, match="is a read-only team store for this user"):
            viewer.remember("a reader's finding")
        with pytest.raises(ReadOnlyStore, match="nothing was written"):
            viewer.forget(1)
    assert admin.execute("SELECT count(*) FROM nbmemory.notes").fetchone()[0] == 1
    assert admin.execute("SELECT count(*) FROM nbmemory.events").fetchone()[0] == 1
    admin.close()


def test_a_reader_trusts_and_runs_checks_in_their_own_kernel(
        team_url, postgres_server, tmp_path, monkeypatch):
    """Found by a walkthrough: a read-only member could neither trust a check (its journal
    entry was refused) nor see an outcome (recording it was refused after the run)."""
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        note = ada.remember("two is one and one", check="1 + 1 == 2", namespace={})
    admin = psycopg.connect(Address.parse(team_url).conninfo, autocommit=True)
    events = admin.execute("SELECT count(*) FROM nbmemory.events").fetchone()[0]
    monkeypatch.setenv("JUPYTERHUB_USER", "checkreader")
    with open_as_role(admin, team_url, "checkreader", "SELECT", tmp_path, monkeypatch) as reader:
        [(item, outcome)] = reader.check({}, [note.id])
        assert (outcome.status, item["recorded"]) == ("skipped", False)
        assert outcome.why == "not trusted: written by ada"
        reader.trust(note.id)
        [(item, outcome)] = reader.check({}, [note.id])
        assert (outcome.status, item["recorded"]) == ("passed", False)
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance(history_length=0)
        try:
            shell.run_line_magic("load_ext", "nbmemory")
            magics = shell.magics_manager.registry["NbMemory"]
            magics.store, magics._memory = team_url, reader
            with capture_output() as out:
                shell.run_line_magic("memory", f"check {note.id}")
            assert out.stdout == ("#1 holds: 1 + 1 == 2 (value 2)\nNot recorded in the store: "
                                  "it is read-only for you (the outcomes are yours alone).\n")
            magics._memory = None
        finally:
            InteractiveShell.clear_instance()
    assert admin.execute("SELECT count(*) FROM nbmemory.events").fetchone()[0] == events
    admin.close()


def test_a_catch_up_cut_off_half_way_is_taken_again_from_where_it_was(ada_and_bo, monkeypatch):
    from nbmemory.engine.indexes import Dense
    from nbmemory.errors import StoreUnreachable

    ada, bo = ada_and_bo
    first = ada.remember("the nightly export moved to Airflow")
    assert bo.recall("nightly export")[0].note.id == first.id
    engine = bo.memory._backend.engine
    seen = engine.journal.position
    real_sync = Dense.sync

    def server_gone(self, note_ids):  # the keywords took the note, then the server went away
        raise StoreUnreachable("The team store is unreachable (test)")

    monkeypatch.setattr(Dense, "sync", server_gone)
    second = ada.remember("the wombat census runs on Tuesdays")  # bo's listener fails too
    with pytest.raises(StoreUnreachable):
        engine.catch_up()
    assert engine.journal.position == seen  # not past what the vectors have not taken
    monkeypatch.setattr(Dense, "sync", real_sync)
    hit = bo.recall("wombat census", explain=True)[0]
    assert hit.note.id == second.id and hit.dense > 0  # its vector: 0 without one
    assert hit.dense == pytest.approx(shown_dense("wombat census", second.text), abs=1e-3)
    assert bo.status()["vectors"] == bo.status()["lexical_docs"] == 2


def test_a_member_is_woken_by_a_colleagues_commit_and_catches_up_before_asking(ada_and_bo):
    ada, bo = ada_and_bo
    engine = bo.memory._backend.engine
    ada.remember("the warehouse is rebuilt at 02:00 UTC")

    def caught_up():
        with engine.lock:  # the listener thread catches up under the engine's lock
            return engine.journal.position == 1 and len(engine.lexical) == 1 and (
                engine.vectors is not None and len(engine.vectors) == 1)

    wait_for(caught_up, what="bo's indexes to get ada's note without bo asking")


def test_purge_leaves_the_text_in_no_row_of_the_team_store(team_url, tmp_path, monkeypatch):
    secret = "the staging password is hunter2"
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        namespace = {"password": "hunter2"}
        note = ada.remember(secret, check="password == 'hunter2'", namespace=namespace)
        ada.remember("staging runs on db2", provenance=Provenance(  # one cell wrote both
            notebook="/work/ops.ipynb", cell_id="c1",
            cell_source=f"for f in [{secret!r}, 'staging runs on db2']:\n    %remember {{f}}"))
        ada.recall(secret)  # the query is logged
        namespace["password"] = "hunter2!"
        ada.check(namespace)  # the journal keeps the check and the value it saw
        ada.snapshot("s1", message=f"knew that {secret}")  # sealed stale
        ada.verify(note.id)
        ada.refute(note.id, f"no: {secret} was old")
        ada.reopen(note.id)
        ada.purge(note.id)
        assert ada.get(note.id).status == "purged"
    with psycopg.connect(Address.parse(team_url).conninfo) as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'nbmemory'")]
        for table in tables:
            assert con.execute(f"SELECT count(*) FROM nbmemory.{table} t "
                               "WHERE t::text LIKE '%hunter2%'").fetchone()[0] == 0, table
    # Nor in any file of the member's machine: the copy kept for outages is compacted too.
    kept = [path for path in (tmp_path / "cache-ada").rglob("*")
            if path.is_file() and b"hunter2" in path.read_bytes()]
    assert kept == []


def test_a_colleagues_purge_also_scrubs_the_notes_that_quoted_it_on_this_machine(
        ada_and_bo, tmp_path):
    """A purge takes the note's text out of the cell other notes keep as provenance, in
    rows no event names: a colleague's owner reads those notes again too (its copy for
    outages kept the quote until the quoting note next changed)."""
    ada, bo = ada_and_bo
    secret = "the staging password is hunter2"
    note = ada.remember(secret)
    cell = f"for f in [{secret!r}, 'staging runs on db2']:\n    %remember {{f}}"
    other = ada.remember("staging runs on db2", provenance=Provenance(
        notebook="/work/ops.ipynb", cell_id="c1", cell_source=cell))
    assert bo.get(other.id).provenance.cell_source == cell  # bo has read it, and kept it
    assert [h.note.id for h in bo.recall("staging runs on db2")][:1] == [other.id]
    ada.purge(note.id)
    scrubbed = "for f in ['[purged]', 'staging runs on db2']:\n    %remember {f}"
    assert bo.get(other.id).provenance.cell_source == scrubbed
    [hit] = [h for h in bo.recall("staging runs on db2") if h.note.id == other.id]
    assert hit.note.provenance.cell_source == scrubbed  # recall reads the cards
    bo.close()
    kept = [path for path in (tmp_path / "cache-bo").rglob("*")
            if path.is_file() and b"hunter2" in path.read_bytes()]
    assert kept == []


def test_an_engine_opens_on_the_local_copy_while_the_server_is_away_then_takes_it_back(
        team_url, postgres_server, tmp_path, monkeypatch):
    """A laptop off the network once its last owner exited: reads answer from the copy
    (by meaning too: it holds the vectors), writes wait, and the server is taken back."""
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        note = ada.remember("the warehouse is rebuilt at 02:00 UTC", tags="warehouse")
        ada.remember("the finance dashboard refreshes hourly")
    postgres_server.stop("immediate")
    away = True
    try:
        with member(team_url, tmp_path, monkeypatch, "ada") as ada:
            hits = ada.recall("when is the warehouse rebuilt")
            assert [h.note.id for h in hits][:1] == [note.id]
            assert hits.behind.startswith("The team store is unreachable: these come from "
                                          "this machine's copy as of ")
            assert [h.note.id for h in ada.recall("warehouse rebuilt", mode="dense")][:1] == [
                note.id]
            assert ada.get(note.id).behind == hits.behind
            assert ada.notes(tags="warehouse").total == 1
            with pytest.raises(StoreUnreachable, match="is unreachable"):
                ada.remember("a finding while the server is down")
            assert ada.written_by("cell-0123") is None  # %remember asks first, then writes
            with pytest.raises(StoreUnavailable, match=(  # not in the copy: said at once
                    "This machine's copy holds the notes, what they are about and their "
                    "vectors, not what a read of a note's history needs")):
                ada.history(note.id)
            assert "is unreachable" in ada.status()["unreachable"]
            # Reads at once from several threads: every answer says where it comes from.
            marks = []
            threads = [threading.Thread(target=lambda: marks.extend(
                ada.recall("warehouse rebuilt").behind for _ in range(10))) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len(marks) == 40 and all(marks)
            postgres_server.start()
            away = False
            ada.memory._backend.engine.store.retry_at = 0  # due to ask again (every 5 s)
            # The call that asks the server again answers from it, not from the old copy.
            assert ada.recall("warehouse rebuilt").behind is None
            later = ada.remember("the warehouse rebuild moved to 03:00 UTC", tags="warehouse")
            assert ada.notes(tags="warehouse").total == 2
        with member(team_url, tmp_path, monkeypatch, "bo") as bo:
            assert bo.get(later.id).text == "the warehouse rebuild moved to 03:00 UTC"
    finally:
        if away:
            postgres_server.start()


def test_a_read_whose_connection_was_ended_asks_the_server_again_before_the_copy(
        team_url, postgres_server, tmp_path, monkeypatch):
    """A server restarted (or an admin ending a session): the next read fails on a
    connection that looked fine. It asks again on a new one, so it still sees a colleague's
    acknowledged note; it answered from the copy, possibly behind, saying the server was
    unreachable while it was up."""
    with member(team_url, tmp_path, monkeypatch, "ada") as ada, \
            member(team_url, tmp_path, monkeypatch, "bo") as bo:
        ada.remember("the warehouse is rebuilt at 02:00 UTC")
        assert bo.recall("warehouse rebuilt")[0].note.text.startswith("the warehouse")
        postgres_server.stop("immediate")
        postgres_server.start()
        note = None
        for _ in range(3):  # as ada's client resends a write that was not acknowledged
            try:
                note = ada.remember("the loquat export moved to Airflow")
                break
            except StoreUnreachable:
                continue
        hits = bo.recall("loquat export")
        assert hits.behind is None and [h.note.id for h in hits][:1] == [note.id]


def test_an_owner_starting_while_the_server_is_away_asks_it_once(
        team_url, postgres_server, tmp_path, monkeypatch):
    """A server that drops packets costs a connect timeout (10 s) per attempt: the owner
    reads its store's model and opens its engine from one attempt, not two."""
    from nbmemory.lock import OwnerLock
    from nbmemory.service.owner import _open_engine

    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the warehouse is rebuilt at 02:00 UTC")
        directory = ada.memory.location.path
    attempts = []
    connect = PostgresStore._connect
    monkeypatch.setattr(PostgresStore, "_connect",
                        lambda self: attempts.append(1) or connect(self))
    postgres_server.stop("immediate")
    lock = OwnerLock(directory)
    lock.acquire()
    try:
        engine, model = _open_engine(directory, lock, None, None)
        try:
            assert engine.away and model == "hash:64"
            assert len(attempts) == 1
        finally:
            engine.close()
    finally:
        lock.release()
        postgres_server.start()


def test_a_copy_behind_the_index_files_still_serves_while_the_server_is_away(
        team_url, postgres_server, tmp_path, monkeypatch):
    """The copy misses a commit (its update failed): the indexes saved are ahead of it. An
    owner started offline rebuilt nothing and refused the store as one that lost writes."""
    from nbmemory.engine.mirror import Mirror

    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        note = ada.remember("the ledger closes on the 3rd working day")
        with monkeypatch.context() as failing:
            failing.setattr(Mirror, "catch_up", lambda *a: (_ for _ in ()).throw(
                StoreUnreachable("the copy's update failed")))
            ada.remember("exports run at 02:00")
    postgres_server.stop("immediate")
    try:
        with member(team_url, tmp_path, monkeypatch, "ada") as ada:
            hits = ada.recall("when does the ledger close", mode="dense")
            assert hits.behind and hits[0].note.id == note.id
    finally:
        postgres_server.start()


def test_a_server_back_from_an_older_backup_is_not_taken_as_the_store(
        team_url, postgres_server, tmp_path, monkeypatch):
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the ledger closes on the 3rd working day")
        ada.remember("exports run at 02:00")
    postgres_server.stop("immediate")
    try:
        with member(team_url, tmp_path, monkeypatch, "ada") as ada:
            assert ada.recall("ledger").behind
            postgres_server.start()
            with psycopg.connect(Address.parse(team_url).conninfo, autocommit=True) as admin:
                admin.execute("DELETE FROM nbmemory.events WHERE seq > 1")  # as restored
            with pytest.raises(StoreUnavailable, match=(
                    r"is back with fewer events \(journal position 1\) than this machine saw "
                    r"\(2\): it was restored from an older backup")):
                wait_for(lambda: ada.recall("ledger").behind is None, timeout=60,
                         what="the engine to refuse the server")
    finally:
        try:
            psycopg.connect(Address.parse(team_url).conninfo, connect_timeout=2).close()
        except psycopg.OperationalError:
            postgres_server.start()


def test_kernels_see_a_colleagues_commit_in_the_store_token_without_asking(ada_and_bo):
    from nbmemory.ambient import store_token

    ada, bo = ada_and_bo
    directory = bo.memory.location.path
    before = store_token(directory)
    ada.remember("the nightly export writes to s3://lake/exports")
    wait_for(lambda: store_token(directory) != before,
             what="bo's position file to change after ada's commit")


def test_the_cli_and_doctor_on_a_team_store(team_url, tmp_path, monkeypatch, capsys):
    from nbmemory import cli

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")

    def nbm(*argv):
        capsys.readouterr()
        code = cli.main(["--store", team_url, *argv])
        return code, capsys.readouterr()

    code, out = nbm("doctor")
    assert code == 0
    assert "schema nbmemory" in out.out and "empty store" in out.out
    code, out = nbm("remember", "the ledger closes on the 3rd working day")
    assert code == 0, out.err
    code, out = nbm("recall", "when does the ledger close")
    assert "the ledger closes on the 3rd working day" in out.out
    monkeypatch.setenv("JUPYTERHUB_USER", "someone-else")
    code, out = nbm("recall", "--mine", "when does the ledger close")
    assert "the ledger closes" not in out.out
    code, out = nbm("list", "--author", "someone-else,nobody")
    assert "No active notes match." in out.out
    code, out = nbm("doctor")  # an owner serves the store: the server is checked too
    assert "OK    server" in out.out and "may read and write" in out.out, out.out
    code, out = nbm("stop")
    code, out = nbm("doctor")
    assert "1 active" in out.out and "may read and write" in out.out


def test_an_owner_started_while_the_server_is_away_serves_the_copy(
        team_url, postgres_server, tmp_path, monkeypatch, capsys):
    """The shell on a laptop off the network, its owner long gone: recall answers from the
    copy and says so; a write says why it waited, then fails; nothing was stored."""
    from nbmemory import cli

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    monkeypatch.setenv("NBMEMORY_RESEND_TIMEOUT", "1")

    def nbm(*argv):
        capsys.readouterr()
        code = cli.main(["--store", team_url, *argv])
        return code, capsys.readouterr()

    assert nbm("remember", "the ledger closes on the 3rd working day")[0] == 0
    assert nbm("stop")[0] == 0
    postgres_server.stop("immediate")
    try:
        code, out = nbm("recall", "when does the ledger close")
        assert code == 0, out.err
        assert "the ledger closes on the 3rd working day" in out.out
        assert "The team store is unreachable: these come from this machine's copy" in out.out
        code, out = nbm("stale")
        assert out.out.startswith("(The team store is unreachable: these come from this "
                                  "machine's copy as of "), out
        code, out = nbm("history", "1")  # not in the copy: said at once, not retried
        assert code == 3 and "not what a read of a note's history needs" in out.err, out
        code, out = nbm("remember", "a finding while the server is down")
        assert code != 0 and "still unreachable after" in out.err, out
    finally:
        postgres_server.start()
        nbm("stop")
    with Memory.open(team_url, model="hash:64", mode="local") as team:
        assert [n.text for n in team.notes().notes] == ["the ledger closes on the 3rd working day"]


def test_doctor_says_when_a_role_may_not_create_the_store_it_names(
        team_url, tmp_path, monkeypatch, capsys):
    """A first member without CREATE on the database: every command refuses (the store
    does not exist and this role may not make it), so doctor may not pass it."""
    from nbmemory import cli

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    with psycopg.connect(Address.parse(team_url).conninfo, autocommit=True) as admin:
        admin.execute("CREATE ROLE newcomer LOGIN")
        try:
            url = team_url.replace("postgres@", "newcomer@")
            assert cli.main(["--store", url, "doctor"]) == 1
        finally:
            admin.execute("DROP ROLE newcomer")
    out = capsys.readouterr().out
    assert ("FAIL  schema            empty store (no schema yet), and newcomer may not create "
            "it (schema nbmemory)") in out
    assert "-> Ask the database's owner to open it once, or to grant CREATE on the database." \
        in out
    assert out.rstrip().endswith("1 problem found.")


def test_doctor_on_a_database_that_does_not_exist_says_refused_not_away(
        postgres_server, tmp_path, monkeypatch, capsys):
    from nbmemory import cli

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    url = postgres_server.url("nosuchdb")
    assert cli.main(["--store", url, "doctor"]) == 1
    out = capsys.readouterr().out
    assert f"{url} refused this connection (" in out and 'database "nosuchdb" does not exist' in out
    assert "-> Check the address, and that ~/.pgpass" in out and "server runs" not in out


def test_a_member_without_usage_on_the_schema_is_told_which_grant_to_ask_for(
        team_url, tmp_path, monkeypatch, capsys):
    """PostgreSQL skips a schema the role may not use in its search path: the first
    statement failed with 'no schema has been selected to create in', and doctor called
    the existing store empty."""
    from nbmemory import cli

    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the ledger closes on the 3rd")
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache-dan"))
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    url = team_url.replace("postgres@", "dan@")
    with psycopg.connect(Address.parse(team_url).conninfo, autocommit=True) as admin:
        admin.execute("CREATE ROLE dan LOGIN")
        admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA nbmemory TO dan")  # no USAGE
        try:
            with pytest.raises(StoreUnavailable) as refused:
                Memory.open(url, embedder=HashEmbedder())
            assert cli.main(["--store", url, "doctor"]) == 1
        finally:
            admin.execute("DROP OWNED BY dan")
            admin.execute("DROP ROLE dan")
    said = (f"dan has no access to the team store {url} (schema nbmemory): ask its owner to "
            "GRANT USAGE ON SCHEMA nbmemory TO dan, with the table grants of docs/team.md "
            "(Permissions).")
    assert str(refused.value) == said
    out = capsys.readouterr().out
    assert "FAIL  schema            dan may not use schema nbmemory" in out and said in out


WRITER = """
import json, os, sys
from nbmemory.memory import Memory

url, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Memory.open(url, model="hash:64", mode="service") as mem:
    for i in range(count):
        note = mem.remember(f"{who} measured batch {i} of the ledger totals", author=who)
        print(json.dumps({"id": note.id, "text": note.text}), flush=True)
"""


@pytest.mark.parametrize("kill", [False, True], ids=["steady", "postmaster-killed"])
def test_two_members_four_writer_processes_lose_and_duplicate_nothing(
        team_url, postgres_server, tmp_path, kill):
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    caches = [tmp_path / "cache-ada", tmp_path / "cache-bo"]  # two machines, two owners
    writers = []
    for n in range(4):
        env = {**os.environ, "NBMEMORY_CACHE_DIR": str(caches[n % 2])}
        writers.append(subprocess.Popen([sys.executable, str(script), team_url, f"w{n}", "25"],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True))
    acknowledged = []
    if kill:  # once some notes are acknowledged, kill the postmaster and bring it back
        acknowledged.append(json.loads(writers[0].stdout.readline()))
        postgres_server.stop("immediate")
        postgres_server.start()
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        acknowledged += [json.loads(line) for line in out.splitlines()]
    assert len(acknowledged) == 100

    members = []
    for cache in caches:
        os.environ["NBMEMORY_CACHE_DIR"] = str(cache)
        members.append(Memory.open(team_url, model="hash:64", mode="service"))
    try:
        for mem in members:
            notes = mem.notes(limit=500).notes
            texts = sorted(n.text for n in notes)
            assert texts == sorted(a["text"] for a in acknowledged)  # none lost, none twice
            assert {n.id for n in notes} == {a["id"] for a in acknowledged}
            status = mem.status()
            assert (status["vectors"], status["lexical_docs"]) == (100, 100)
        for mem, other in zip(members, ("w1", "w0")):  # each recalls the other's writers
            hit = mem.recall(f"{other} measured batch 7 of the ledger totals", k=1)[0]
            assert hit.note.text == f"{other} measured batch 7 of the ledger totals"
    finally:
        os.environ.pop("NBMEMORY_CACHE_DIR", None)
        for mem in members:
            mem.close()


def test_recall_and_listing_by_author_and_mine(ada_and_bo, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    ada, bo = ada_and_bo
    ada.remember("the churn model is retrained on Mondays")
    bo.remember("the churn dashboard refreshes hourly")
    assert [h.note.author for h in bo.recall("churn", author="ada")] == ["ada"]
    assert {h.note.author for h in bo.recall("churn", author="ada,bo")} == {"ada", "bo"}
    assert [n.author for n in ada.notes(author=["bo"]).notes] == ["bo"]
    assert bo.recall("churn", author="cy") == []

    from IPython.core.error import UsageError

    shell = InteractiveShell.instance(history_length=0)
    shell.run_line_magic("load_ext", "nbmemory")
    magics = shell.magics_manager.registry["NbMemory"]
    magics._memory = bo.memory
    try:
        os.environ["JUPYTERHUB_USER"] = "bo"
        hits = shell.run_line_magic("recall", "--mine churn")
        assert [h.note.text for h in hits] == ["the churn dashboard refreshes hourly"]
        hits = shell.run_line_magic("recall", "--author ada churn")
        assert [h.note.author for h in hits] == ["ada"]
        with pytest.raises(UsageError, match="Use --mine or --author, not both"):
            shell.run_line_magic("recall", "--mine --author ada churn")
    finally:
        magics._memory = None  # the fixture closes it
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()


def checkout(home, origin):
    """A checkout of the repository ``origin`` under ``home``, with data/orders.csv."""
    import subprocess

    repo = home / "src" / "orders"
    (repo / "data").mkdir(parents=True)
    (repo / "data" / "orders.csv").write_text("id,amount\n1,1000\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", origin], check=True)
    return repo


def test_an_anchor_in_a_repository_is_checked_against_each_members_checkout(
        team_url, tmp_path, monkeypatch):
    from nbmemory.repos import normalise_remote

    homes = {name: tmp_path / name for name in ("ada", "bo", "cy")}
    ada_repo = checkout(homes["ada"], "https://ada:s3cret@github.com/Team/orders.git")
    bo_repo = checkout(homes["bo"], "git@github.com:team/orders.git")
    homes["cy"].mkdir()
    members = {}
    for name, home in homes.items():
        monkeypatch.setenv("HOME", str(home))  # each member's machine, with its own home
        members[name] = member(team_url, tmp_path, monkeypatch, name)
    ada, bo, cy = members.values()
    try:
        note = ada.remember("orders.amount is in cents", about=[str(ada_repo / "data/orders.csv")])
        (anchor,) = note.anchors
        assert (anchor.target, anchor.fingerprint["repo"]) == ("data/orders.csv",
                                                              "github.com/team/orders")
        assert "s3cret" not in str(anchor.fingerprint)
        assert bo.get(note.id).stale == ()  # bo's own checkout, elsewhere, is the same
        (bo_repo / "data" / "orders.csv").write_text("id,amount\n1,10.00\n2,5.00\n")
        assert [r.reason for r in bo.get(note.id).stale] == ["schema_changed", "rows_changed"]
        assert ada.get(note.id).stale == ()  # ada's checkout did not change
        (reason,) = cy.get(note.id).stale
        assert (reason.reason, reason.target) == ("unchecked", "data/orders.csv")
        assert reason.detail == ("in github.com/team/orders, which is not checked out on "
                                 "this machine")
    finally:
        for mem in members.values():
            mem.memory.close()
    assert normalise_remote("ssh://git@gitlab.example.com:2222/a/b.git") == "gitlab.example.com/a/b"


def test_a_note_shared_from_a_checkout_is_checked_against_each_members_checkout(
        team_url, tmp_path, monkeypatch):
    """A personal store in a git checkout keeps paths relative to it: shared, they say
    which repository (each member showed the note as missing, the sharer too)."""
    homes = {name: tmp_path / name for name in ("ada", "bo")}
    ada_repo = checkout(homes["ada"], "git@github.com:team/orders.git")
    bo_repo = checkout(homes["bo"], "https://github.com/team/orders")
    monkeypatch.setenv("HOME", str(homes["ada"]))
    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache-ada"))
    with Memory.open(ada_repo / ".nbmemory", embedder=HashEmbedder()) as mine:
        note = mine.remember("orders.amount is in cents", about=["data/orders.csv"])
        assert mine.share([note.id], team_url, embedder=HashEmbedder())["added"] == 1
    monkeypatch.setenv("HOME", str(homes["bo"]))
    with member(team_url, tmp_path, monkeypatch, "bo") as bo:
        (shared,) = bo.notes().notes
        assert bo.get(shared.id).stale == ()  # found in bo's own checkout
        (bo_repo / "data" / "orders.csv").write_text("id,amount\n1,10.00\n2,5.00\n")
        assert [r.reason for r in bo.get(shared.id).stale] == ["schema_changed", "rows_changed"]


def test_a_colleagues_notebook_cell_and_sealed_flags_are_theirs_to_check(
        team_url, tmp_path, monkeypatch):
    """A cell is in the writer's notebook, on their machine: another member has no file to
    judge it by (it showed every colleague's notebook note as missing), and flags sealed in
    a snapshot are the sealer's machine's (a diff elsewhere showed changes that never were)."""
    import nbformat

    from nbmemory.models import Provenance
    from nbmemory.provenance import source_hash

    homes = {name: tmp_path / name for name in ("ada", "bo")}
    members = {}
    for name, home in homes.items():
        home.mkdir()
        monkeypatch.setenv("HOME", str(home))
        members[name] = member(team_url, tmp_path, monkeypatch, name)
    ada, bo = members.values()
    try:
        notebook = homes["ada"] / "analysis.ipynb"
        source = "%remember refunds are negative amounts"
        nb = nbformat.v4.new_notebook()
        nb.cells.append(nbformat.v4.new_code_cell(source, id="c1"))
        notebook.write_text(nbformat.writes(nb))
        note = ada.remember("refunds are negative amounts", provenance=Provenance(
            notebook=str(notebook), cell_id="c1", cell_hash=source_hash(source),
            cell_source=source, source="notebook"))
        (cell,) = [a for a in note.anchors if a.kind == "cell"]
        assert cell.fingerprint["machine"].startswith("ada@")
        notebook.unlink()
        assert [r.reason for r in ada.get(note.id).stale] == ["missing"]
        assert bo.get(note.id).stale == ()  # bo has no such notebook, and needs none
        ada.snapshot("sealed-by-ada")
        assert ada.recall("refunds negative", as_of="sealed-by-ada")[0].note.stale != ()
        assert bo.recall("refunds negative", as_of="sealed-by-ada")[0].note.stale == ()
        assert [c.change for c in bo.snapshot_diff("sealed-by-ada").changes] == []
        assert bo.verify(note.id).anchors == note.anchors  # kept as ada took it
        assert [r.reason for r in ada.get(note.id).stale] == ["missing"]
    finally:
        for mem in members.values():
            mem.memory.close()


def test_sharing_chosen_notes_copies_them_with_their_history_once(team_url, tmp_path, monkeypatch):
    from nbmemory.errors import NotFound

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    with Memory.open(tmp_path / "mine", embedder=HashEmbedder()) as mine:
        lock = mine.remember("the lock is taken in watcher.py", author="ada")
        mine.edit(lock.id, text="the lock is taken in watcher.py:42")
        private = mine.remember("my own scratch idea about retries")
        old = mine.remember("amounts are in euros")
        new = mine.supersede(old.id, "amounts are in cents before 2021")
        summary = mine.share([lock.id, new.id], team_url, embedder=HashEmbedder())
        assert summary["added"] == 2
        again = mine.share([lock.id], team_url, embedder=HashEmbedder())
        assert (again["added"], again["skipped"]) == (0, 1)
        with pytest.raises(NotFound, match="No note #99. .*Nothing was shared"):
            mine.share([99], team_url, embedder=HashEmbedder())
    with Memory.open(team_url, embedder=HashEmbedder()) as team:
        notes = {n.text: n for n in team.notes().notes}
        assert set(notes) == {"the lock is taken in watcher.py:42",
                              "amounts are in cents before 2021"}
        shared = notes["the lock is taken in watcher.py:42"]
        assert shared.version == 2
        from nbmemory.config import current_user

        assert [(e.type, e.actor) for e in team.history(shared.id)] == [
            ("created", "ada"), ("edited", current_user())]
        assert notes["amounts are in cents before 2021"].supersedes is None  # #3 was not shared
        assert all(h.note.text != private.text
                   for h in team.recall("scratch idea retries", min_score=0))


def test_memory_share_and_the_cli_share_to_the_team_store(team_url, tmp_path, monkeypatch, capsys):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    from nbmemory import cli

    monkeypatch.setenv("NBMEMORY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NBMEMORY_MODEL", "hash:64")
    mine = tmp_path / "mine"
    assert cli.main(["--store", str(mine), "remember", "the ledger closes on day 3"]) == 0
    assert cli.main(["--store", str(mine), "remember", "exports run at 02:00"]) == 0
    capsys.readouterr()
    assert cli.main(["--store", str(mine), "share", "1", "--to", team_url]) == 0
    assert f"Shared 1 note with {team_url}: 1 added." in capsys.readouterr().out
    assert cli.main(["--store", str(mine), "edit", "1", "--text", "the ledger closes on day 4"]) == 0
    capsys.readouterr()
    assert cli.main(["--store", str(mine), "share", "1", "--to", team_url]) == 0
    assert (f"Shared 1 note with {team_url}: 0 added, 1 there in another version, left as it "
            "is (--replace sends this one).") in capsys.readouterr().out
    assert cli.main(["--store", str(mine), "share", "1", "--to", team_url, "--replace"]) == 0
    assert f"Shared 1 note with {team_url}: 0 added, 1 replaced." in capsys.readouterr().out

    shell = InteractiveShell.instance(history_length=0)
    shell.run_line_magic("load_ext", "nbmemory")
    try:
        shell.run_line_magic("config", f"NbMemory.store = {str(mine)!r}")
        shell.run_line_magic("config", "NbMemory.model = 'hash:64'")
        with pytest.raises(UsageError, match="Say where to share the notes"):
            shell.run_line_magic("memory", "share 2")
        shell.run_line_magic("config", f"NbMemory.team_store = {team_url!r}")
        capsys.readouterr()
        shell.run_line_magic("memory", "share 1 2")
        out = capsys.readouterr().out
        assert f"Shared 2 notes with {team_url}: 1 added, 1 already there." in out
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()
    with Memory.open(team_url, model="hash:64") as team:
        assert sorted(n.text for n in team.notes().notes) == ["exports run at 02:00",
                                                             "the ledger closes on day 4"]


def test_while_the_server_is_away_reads_answer_from_the_local_copy_marked_behind(
        team_url, postgres_server, tmp_path, monkeypatch):
    from nbmemory.errors import StoreUnreachable

    with member(team_url, tmp_path, monkeypatch, "ada") as ada, \
            member(team_url, tmp_path, monkeypatch, "bo") as bo:
        note = ada.remember("the warehouse is rebuilt at 02:00 UTC", tags="warehouse")
        engine = bo.memory._backend.engine
        wait_for(lambda: engine.mirror.position == 1, what="bo's copy to get ada's note")
        postgres_server.stop("immediate")
        try:
            hits = bo.recall("when is the warehouse rebuilt")
            assert [h.note.id for h in hits] == [note.id]
            assert hits.behind.startswith("The team store is unreachable: these come from "
                                          "this machine's copy as of ")
            shown = bo.get(note.id)  # one note read (show) says so too
            assert (shown.text, shown.behind) == (note.text, hits.behind)
            assert shown.to_dict()["behind"] == hits.behind
            page = bo.notes(tags="warehouse")
            assert [n.id for n in page.notes] == [note.id]
            assert page.behind == hits.behind  # a listing says it may be behind too
            # What the magics read before every recall and listing answers too.
            assert bo.variable_anchors() == []
            assert bo.stale().total == 0
            with pytest.raises(StoreUnreachable, match="is unreachable"):
                bo.remember("a finding while the server is down")
            status = bo.status()
            assert status["notes"] == 1 and "is unreachable" in status["unreachable"]
            assert status["store"] == team_url
            # The copy holds no snapshots: not "0 snapshots" but unknown; nor the recall
            # statistics (it said "no recalls yet" right after a recall).
            assert status["snapshots"] is None
            assert (status["recalls"], status["empty_recalls"]) == (None, None)
            shown = status_display(status).text
            assert "unknown while the server is away" in shown
            assert "no recalls yet" not in shown
        finally:
            postgres_server.start()
        hits = bo.recall("when is the warehouse rebuilt")
        assert hits.behind is None and [h.note.id for h in hits] == [note.id]
        assert bo.notes(tags="warehouse").behind is None
        assert bo.get(note.id).behind is None and "behind" not in bo.get(note.id).to_dict()


def test_a_check_under_a_cell_is_said_while_the_server_is_away_and_ambient_comes_back(
        team_url, postgres_server, tmp_path, monkeypatch):
    """Found by a walkthrough: while the server was away, a cell that changed what a check
    reads waited the resend timeout (120 s) to journal the outcome, never said it, and
    paused the line under cells for the rest of the session."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.setenv("NBMEMORY_RESEND_TIMEOUT", "5")  # the wait it had, shortened here
    shell = InteractiveShell.instance(history_length=0)

    def cell(source):
        with capture_output() as captured:
            assert shell.run_cell(source).success
        return captured.stdout, captured.stderr

    shell.run_line_magic("load_ext", "nbmemory")
    try:
        shell.run_line_magic("config", f"NbMemory.store = {team_url!r}")
        shell.run_line_magic("config", "NbMemory.model = 'hash:64'")
        cell("total = [1, 2, 3]")
        cell('%remember --check "sum(total) > 0" the totals add up to more than nothing')
        assert cell("total = [1, 2]") == ("", "")  # holds: nothing to say
        postgres_server.stop("immediate")
        try:
            out, err = cell("total = [-1, -2]")
            assert out == ("nbmemory: #1 FAILS: sum(total) > 0 is now False (value -3) (not "
                           "recorded yet: the store cannot be reached)\n")
            assert cell("print(len(total))") == ("2\n", "")  # said once, not at each mention
            assert "retrying" not in err
        finally:
            postgres_server.start()
        out, err = cell("total = [-4]")  # judged again, now recorded
        assert out == "nbmemory: #1 FAILS: sum(total) > 0 is now False (value -4)\n", err
        with capture_output() as captured:
            shell.run_line_magic("memory", "ambient status")
        assert captured.stdout.startswith("Ambient recall: on (NbMemory.ambient)")
        memory = shell.magics_manager.registry["NbMemory"].mem
        assert [(i["last"]["status"], i["last"]["value"]) for i in memory.checks()] == [
            ("failed", "-4")]
    finally:
        shell.run_line_magic("unload_ext", "nbmemory")
        InteractiveShell.clear_instance()


def test_recall_statistics_the_server_refuses_never_fail_a_recall_or_status(
        team_url, tmp_path, monkeypatch, caplog):
    """Statistics are written in batches of 100; a batch the server refuses (here a rule
    the team added to the log's table) is dropped and said in the log, not kept to be
    refused again at every later flush, which made every status and, from the 100th
    recall on, every recall fail until the owner restarted."""
    with member(team_url, tmp_path, monkeypatch, "ada") as ada:
        ada.remember("the widgets table is rebuilt nightly")
        with psycopg.connect(Address.parse(team_url).conninfo, autocommit=True) as admin:
            admin.execute("ALTER TABLE nbmemory.recall_log ADD CONSTRAINT no_secrets "
                          "CHECK (query NOT LIKE '%secret%')")
        assert len(ada.recall("secret widgets", min_score=-1)) == 1
        for i in range(120):  # past the 100th: a flush on the way
            assert len(ada.recall(f"widgets {i}", min_score=-1)) == 1
        status = ada.status()
        assert (status["notes"], status["recalls"]) == (1, 21)  # the refused batch: dropped
        assert "nbmemory: 100 recall statistics were dropped: the store refused them " \
               "(CheckViolation:" in caplog.text


def test_a_note_with_nul_from_an_older_local_store_is_refused_by_name_not_by_temp_file(
        team_url, tmp_path, monkeypatch):
    """DuckDB kept a NUL that nbmemory now refuses and PostgreSQL cannot hold: sharing such
    a note, or importing its export, names the note and what to do, not the temporary file
    a share writes, and takes nothing. A local store still takes the export as it is."""
    import duckdb

    local = tmp_path / "local"
    with Memory.open(local, embedder=HashEmbedder()) as mem:
        mem.remember("the widgets feed is hourly")
        mem.remember("orders.amount is in cents before 2021")
        mem.remember("the join drops nulls PLACEHOLDER")
        mem.edit(3, text="the join drops nulls")
    con = duckdb.connect(str(local / "memory.duckdb"))  # as an older nbmemory let it be
    for table, key in (("notes", "id"), ("note_versions", "note_id")):
        con.execute(f"UPDATE {table} SET text = replace(text, 'cents', 'cents' || chr(0)) "
                    f"WHERE {key} = 2")
    con.execute("UPDATE note_versions SET text = replace(text, 'PLACEHOLDER', chr(0)) "
                "WHERE note_id = 3")
    con.close()
    with Memory.open(local, embedder=HashEmbedder()) as mem:
        with pytest.raises(InvalidInput) as refused:
            mem.share([1, 2], team_url, embedder=HashEmbedder())
        assert str(refused.value) == (
            "Note #2 of the store it comes from holds a NUL character (U+0000) in its text, "
            "which a team store cannot keep. Nothing was imported: edit the note there to "
            "remove it (nbmemory edit 2), then share or export it again.")
        with pytest.raises(InvalidInput) as refused:
            mem.share([3], team_url, embedder=HashEmbedder())
        assert str(refused.value) == (
            "Note #3 of the store it comes from holds a NUL character (U+0000) in version 1 "
            "of its text, which a team store cannot keep. Nothing was imported: an old "
            "version cannot be edited, so remember the finding anew there and share the "
            "new note.")
        mem.export_jsonl(tmp_path / "all.jsonl")
    with Memory.open(team_url, embedder=HashEmbedder()) as team:
        with pytest.raises(InvalidInput, match="^Note #2 of the store it comes from holds a NUL"):
            team.import_jsonl(tmp_path / "all.jsonl")
        assert team.status()["notes"] == 0
    with Memory.open(tmp_path / "copy", embedder=HashEmbedder()) as copy:
        assert copy.import_jsonl(tmp_path / "all.jsonl")["restored"] == 3
        assert copy.get(2).text == "orders.amount is in cents\x00 before 2021"


def test_stop_names_the_team_store_not_its_cache_directory(team_url, capsys):
    """It said "Stopped the owner of ~/.cache/nbmemory/team-c893df15a7e2c804 (pid ...)"."""
    from nbmemory import cli

    assert cli.main(["--store", team_url, "stop"]) == 0
    assert capsys.readouterr().out == f"No owner is running for {team_url}.\n"
    with Memory.open(team_url, model="hash:64", mode="service") as mem:
        mem.remember("the ledger closes on day 3")
    assert cli.main(["--store", team_url, "stop"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Stopped the owner of {team_url} (pid "), out
