"""Kill a real loop process against the fake Alpaca right after the broker booked an order, or took a cancel
whose close waits for its confirmation, and before the reply reached the loop (the fake SIGKILLs it there);
restart it, and compare with an uninterrupted run: no order sent twice, the same orders, fills, cash and
positions. The loop trades the embedded SP500 on NYSE sessions and ETH/USD on a seeded synthetic 24/7 series
(every calendar day), holding positions overnight, so kills land on weekend crypto cycles and between a cancel
and the submit that follows it. ``benchmarks/trade_chaos.py`` runs the same harness at every POST and DELETE
(200+ kills)."""

from __future__ import annotations

from marketcast.trade.test_kit.chaos import before_submit, chaos, reference, weekend

START, END = "2018-05-01", "2018-05-20"  # ETH/USD held on 17 of the 20 nights


def test_a_kill_between_the_brokers_booking_and_the_journal_never_duplicates_an_order(tmp_path):
    ref = reference(tmp_path / "reference", START, END)
    assert ref.posts >= 12 and ref.deletes >= 2, (ref.posts, ref.deletes)
    assert ref.overnight["ETHUSD"] >= 10  # the crypto position is carried from day to day, weekends included
    on_weekend = next(i for i, (method, clock) in enumerate(ref.calls) if method == "POST" and weekend(clock))
    cancel_submit = next(i for i in range(len(ref.calls)) if before_submit(ref.calls, i))
    posts = {2, ref.posts // 3, ref.posts - 1, ref.kill_point(on_weekend)[1]}  # after the n-th POST is booked
    deletes = {ref.deletes, ref.kill_point(cancel_submit)[1]}  # after a cancel is taken, before the next submit
    run = chaos(tmp_path / "crashed", START, END, posts, deletes)
    assert run.returncode == 0 and run.killed == len(posts) + len(deletes)
    assert run.weekend_kills >= 1 and run.cancel_submit_kills >= 1, (run.weekend_kills, run.cancel_submit_kills)
    assert len(run.posts) == len(set(run.posts)) == ref.posts  # every order sent once: 0 duplicates, none lost
    assert run.rejections == []  # not even a duplicate-id or wash-trade refusal: the restart asked first
    assert run.books == ref.books
