"""Kill a real loop process against the fake Alpaca right after the broker booked an order, or took a cancel
whose close waits for its confirmation, and before the reply reached the loop (the fake SIGKILLs it there);
restart it, and compare with an uninterrupted run: no order sent twice, the same orders, fills, cash and
positions. ``benchmarks/trade_chaos.py`` runs the same harness at every POST and DELETE (200+ kills)."""

from __future__ import annotations

from marketcast.trade.test_kit.chaos import chaos, reference

START, END = "2018-06-04", "2018-06-22"


def test_a_kill_between_the_brokers_booking_and_the_journal_never_duplicates_an_order(tmp_path):
    ref = reference(tmp_path / "reference", START, END)
    assert ref.posts >= 12 and ref.deletes >= 2, (ref.posts, ref.deletes)
    posts = {2, ref.posts // 3, ref.posts // 2, ref.posts - 1}  # after the n-th order POST is booked
    deletes = {1, ref.deletes}  # after a cancel is taken: its close must wait for the restart's confirmation
    run = chaos(tmp_path / "crashed", START, END, posts, deletes)
    assert run.returncode == 0 and run.killed == len(posts) + len(deletes)
    assert len(run.posts) == len(set(run.posts)) == ref.posts  # every order sent once: 0 duplicates, none lost
    assert run.rejections == []  # not even a duplicate-id or wash-trade refusal: the restart asked first
    assert run.books == ref.books
