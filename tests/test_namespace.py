"""%recall with no query: notes about the variables, columns and paths alive now."""

import pandas as pd

from nbmemory.namespace import namespace_terms

from test_magics import ip, run  # noqa: F401  (the shell fixture)


def test_namespace_terms(tmp_path):
    data = tmp_path / "orders.csv"
    data.write_text("a\n1\n")
    ns = {"orders": pd.DataFrame({"amount": [1], "customer_id": [2]}), "path": str(data),
          "_hidden": 1, "pd": pd, "n": 3, "In": []}
    assert namespace_terms(ns) == ["orders", "amount", "customer_id", "path", str(data), "n"]


def test_recall_with_no_query_ranks_notes_about_the_namespace(ip, tmp_path):  # noqa: F811
    run(ip, "remember orders.amount is in cents before 2021")
    run(ip, "remember the watcher races acquire_lock")
    run(ip, "remember customer_id is null for guest checkouts")
    ip.run_cell("import pandas as pd\norders = pd.DataFrame({'amount': [1], 'customer_id': [7]})")
    hits, _ = run(ip, "recall")
    assert sorted(h.note.id for h in hits) == [1, 3]
    assert hits[0].score == 1.0 and hits.query.endswith(" in this kernel")


def test_recall_with_no_query_finds_notes_anchored_to_what_is_alive(ip, tmp_path,  # noqa: F811
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "regions.csv").write_text("code,name\nN,North\n")
    ip.run_cell("import pandas as pd\nsales = pd.DataFrame({'region': ['N'], 'total': [3]})")
    run(ip, "remember --about sales figures are gross, VAT included")
    run(ip, "remember --about regions.csv codes are single letters")
    run(ip, "remember the watcher races acquire_lock")
    ip.run_cell("source = 'regions.csv'")
    hits, _ = run(ip, "recall")
    assert [h.note.id for h in hits] == [2, 1]  # neither text names a live term
    assert [h.score for h in hits] == [1.0, 1.0]
    ip.run_cell("del sales")
    hits, _ = run(ip, "recall")
    assert [h.note.id for h in hits] == [2]
