"""The loop's own records: the write-ahead journal (state, db), halts, the lock, owner-only files and order ids."""
