"""The report package sits above the run store and the trading loop and below the CLI."""

from tests.compile.test_layers import PACKAGE, imported, module_name


def _edges():
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in imported(path):
            if name.startswith("marketcast."):
                yield path, module_name(path), name


def test_only_the_cli_layer_imports_the_report_package():
    up = [(m, name) for path, m, name in _edges() if name.startswith("marketcast.report")
          and not m.startswith("marketcast.report") and path.name != "cli.py"]
    assert up == []


def test_the_report_package_imports_no_command_and_no_sweep():
    down = [(m, name) for path, m, name in _edges() if m.startswith("marketcast.report.") and path.name != "cli.py"
            and (name.split(".")[-1] == "cli" or ".cli." in name or name.startswith(("marketcast.sweep", "marketcast.cli")))]
    assert down == []
    assert ("marketcast.report.stored", "marketcast.runs.remake") in {(m, n) for _, m, n in _edges()}  # it sees them
