"""Settings precedence, bad values, and the in-place .env.compile toggle."""

from __future__ import annotations

import os

import pytest

from marketcast.compile.envfile import render_updates, update_env_file
from marketcast.runtime.compile_settings import describe_sources, load_settings
from marketcast.compile.toggle import mode_updates, set_enabled, set_mode
from marketcast.errors import ConfigError

ORIGINAL = """# marketcast compile settings
export ADD_LATEST=1

export TOTO_DISABLE_COMPILE=1  # eager: recompiles on the KV cache
TOTO_COMPILE_MODE=max-autotune
# KRONOS_COMPILE=1  (do not: CUDA graphs bug)
OTHER="keep me"
"""


def test_precedence_env_over_file_over_default(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text("TOTO_COMPILE_MODE=max-autotune\nKRONOS_COMPILE=yes\nTORCHDYNAMO_RECOMPILE_LIMIT=16\n")
    s = load_settings(env={"TOTO_COMPILE_MODE": "reduce-overhead"}, path=path)
    assert s.toto_mode == "reduce-overhead" and s.sources["toto_mode"] == "env"
    assert s.kronos_compile is True and s.sources["kronos_compile"] == "file"
    assert s.recompile_limit == 16
    assert s.kronos_mode == "reduce-overhead" and "kronos_mode" not in s.sources  # default
    assert s.toto_compile is None  # auto
    assert s.mode_for("toto", "cpu") is None and s.mode_for("toto", "cuda") == "reduce-overhead"
    assert s.mode_for("kronos", "cpu") == "default"  # CUDA graphs need CUDA


def test_describe_sources_reports_each_key_and_shadowed_file_value(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text("TOTO_COMPILE=0\nTOTO_COMPILE_MODE=default\n")
    rows = {r.key: r for r in describe_sources(env={"TOTO_COMPILE": "1"}, path=path)}
    assert (rows["TOTO_COMPILE"].value, rows["TOTO_COMPILE"].source) == ("1", "env")
    assert rows["TOTO_COMPILE"].shadowed_file_value == "0"
    assert (rows["TOTO_COMPILE_MODE"].value, rows["TOTO_COMPILE_MODE"].source) == ("default", "file")
    assert rows["KRONOS_COMPILE"].source == "default"


@pytest.mark.parametrize("word,expected", [("1", True), ("TRUE", True), ("yes", True), ("On", True),
                                           ("0", False), ("false", False), ("no", False), ("off", False)])
def test_truthy_falsy_words(word, expected):
    assert load_settings(env={"KRONOS_COMPILE": word}, path="/nonexistent").kronos_compile is expected


@pytest.mark.parametrize("env,needle", [
    ({"TOTO_COMPILE": "maybe"}, "TOTO_COMPILE='maybe' (environment) is not a boolean"),
    ({"TOTO_COMPILE_MODE": "fast"}, "TOTO_COMPILE_MODE='fast' (environment) is not a compile mode"),
    ({"TORCHDYNAMO_RECOMPILE_LIMIT": "-3"}, "must be a positive integer"),
    ({"TOTO_COMPILE_BACKEND": "in ductor"}, "is not a backend name"),
])
def test_bad_values_raise_config_error(env, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        load_settings(env=env, path="/nonexistent")


def test_bad_value_in_file_names_the_file(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text("export KRONOS_COMPILE=2\n")
    with pytest.raises(ConfigError, match=str(path)):
        load_settings(env={}, path=path)


def test_disable_wins_over_compile():
    s = load_settings(env={"TOTO_COMPILE": "1", "TOTO_DISABLE_COMPILE": "1"}, path="/nonexistent")
    assert s.toto_compile is False
    s = load_settings(env={"TOTO_COMPILE": "0", "TOTO_DISABLE_COMPILE": "0"}, path="/nonexistent")
    assert s.toto_compile is False
    assert load_settings(env={"TOTO_DISABLE_COMPILE": "0"}, path="/nonexistent").toto_compile is True


def test_toggle_round_trip_preserves_every_other_line(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text(ORIGINAL)
    set_enabled(path, "toto", True)
    text = path.read_text()
    assert "export TOTO_DISABLE_COMPILE=0  # eager: recompiles on the KV cache\n" in text
    assert text.endswith("export TOTO_COMPILE=1\n")
    assert load_settings(env={}, path=path).toto_compile is True
    set_enabled(path, "toto", False)
    assert load_settings(env={}, path=path).toto_compile is False
    # every line of the original is still there except the toggled one, in order
    new_lines = path.read_text().splitlines()
    assert new_lines[: len(ORIGINAL.splitlines())] == ORIGINAL.splitlines()  # DISABLE=1 again
    assert new_lines[len(ORIGINAL.splitlines()):] == ["export TOTO_COMPILE=0"]
    set_mode(path, "toto", "reduce-overhead")
    assert "TOTO_COMPILE_MODE=reduce-overhead\n" in path.read_text()
    assert "TOTO_COMPILE_MODE=max-autotune" not in path.read_text()
    assert 'OTHER="keep me"' in path.read_text() and "export ADD_LATEST=1" in path.read_text()
    assert "# KRONOS_COMPILE=1  (do not: CUDA graphs bug)" in path.read_text()


def test_toggle_kronos_and_new_file(tmp_path):
    path = tmp_path / "sub" / ".env.compile"
    set_enabled(path, "all", True)
    s = load_settings(env={}, path=path)
    assert s.toto_compile is True and s.kronos_compile is True
    set_mode(path, "kronos", "max-autotune-no-cudagraphs")
    assert load_settings(env={}, path=path).kronos_mode == "max-autotune-no-cudagraphs"


def test_unknown_mode_rejected_and_file_untouched(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text(ORIGINAL)
    with pytest.raises(ConfigError, match="unknown compile mode 'turbo'"):
        set_mode(path, "toto", "turbo")
    assert path.read_text() == ORIGINAL
    with pytest.raises(ConfigError, match="unknown model"):
        mode_updates("chronos", "default")


def test_write_is_atomic_and_keeps_permissions(tmp_path):
    path = tmp_path / ".env.compile"
    path.write_text("A=1\n")
    os.chmod(path, 0o600)
    update_env_file(path, {"B": "2"})
    assert path.read_text() == "A=1\nexport B=2\n"
    assert (path.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env.compile"]  # no temp file left


def test_render_updates_rejects_unquotable_values_and_handles_missing_newline():
    with pytest.raises(ConfigError):
        render_updates("", {"A": "two words"})
    assert render_updates("A=1", {"B": "x"}) == "A=1\nexport B=x\n"
    assert render_updates("A=1\r\n", {"A": "2"}) == "A=2\r\n"
