"""Print how many examples each fuzz test ran (and, in survey mode, the failures by kind) at the end."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    from tests.fuzz import harness

    if not harness.EXAMPLES:
        return
    write = terminalreporter.write_line
    write(f"fuzz profile {harness.PROFILE}: {sum(harness.EXAMPLES.values())} examples run"
          f"{' (survey: failures logged, not raised)' if harness.SURVEY else ''}")
    for name, n in sorted(harness.EXAMPLES.items()):
        write(f"  {n:6d}  {name}")
    for kind, n in harness.FAILURES.most_common():
        write(f"  failing examples: {n:6d}  {kind}")
