"""Inputs of ``compile analyze`` / ``compile compare`` that used to mislead or crash: a compressed log read as
"0 recompiles", a binary file read as an empty log, JSON nested past the parser's depth (RecursionError), a
symbolic link that points at itself. Each is read, or refused in one line with exit 2."""

from __future__ import annotations

import gzip
import json
import lzma

import pytest

from marketcast.commands import main
from marketcast.compile.analyze import analyze_paths, analyze_text
from marketcast.errors import ConfigError

# a recompile as torch 2.x logs it under TORCH_LOGS=recompiles (glog prefix, compile id, artifact name)
PREFIX = "V1122 02:37:01.782000 3965 torch/_dynamo/guards.py:5396] [0/1] [__recompiles]"
RECOMPILE_LOG = (
    f"{PREFIX} Recompiling function forward in /src/toto/model/backbone.py:120\n"
    f"{PREFIX}     triggered by the following guard failure(s):\n"
    f"{PREFIX}     - 0/0: tensor 'inputs' size mismatch at index 2. expected 32, actual 48\n"
    "forecast done\n"
)


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_the_plain_log_holds_one_recompile():
    assert analyze_text(RECOMPILE_LOG).totals()["recompile"] == 1


@pytest.mark.parametrize("name, pack", [("recompile.log.gz", gzip.compress), ("recompile.log", gzip.compress),
                                        ("recompile.log.xz", lzma.compress)])
def test_a_compressed_log_is_read_as_its_text(tmp_path, capsys, name, pack):
    path = tmp_path / name  # the magic bytes decide, not the name
    path.write_bytes(pack(RECOMPILE_LOG.encode()))
    result = analyze_paths([path])
    assert result.totals()["recompile"] == 1 and result.lines == 4 and result.undecodable == 0
    group = result.groups[0]
    assert (group.kind, group.function, group.count) == ("recompile", "forward", 1)
    assert main(["compile", "analyze", str(path)]) == 0
    assert "1 log file(s), 4 lines: 0 frames skipped, 0 recompile-limit hits" in capsys.readouterr().out


def test_a_zstd_log_is_refused_with_how_to_decompress_it(tmp_path, capsys):
    path = tmp_path / "recompile.log.zst"
    # a real zstd frame (RFC 8878): magic, header (single segment, 4-byte content), one raw block "log\n"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x20\x04" + b"\x21\x00\x00" + b"log\n")
    assert main(["compile", "analyze", str(path)]) == 2
    assert one_line(capsys) == (f"error: {path}: a zstd-compressed log, which marketcast cannot read; decompress it "
                                "first (zstd -d recompile.log.zst) and pass the plain log, or compress it with gzip")


def test_other_binary_data_and_a_damaged_gzip_are_refused(tmp_path, capsys):
    image = tmp_path / "screenshot.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert main(["compile", "analyze", str(image)]) == 2
    assert one_line(capsys) == (f"error: {image}: binary data, not a text log (byte 8 is NUL); pass the "
                                "TORCH_LOGS=recompiles,graph_breaks capture itself, plain or compressed with gzip "
                                "or xz")
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(RECOMPILE_LOG.encode())[:40])  # a copy that stopped half-way
    with pytest.raises(ConfigError, match=r"cut.log.gz: a damaged gzip file \(.+\); compress the log again"):
        analyze_paths([cut])


BACKTEST = {"symbol": "SP500", "strategies": {"maxdiff": {"return": 0.10, "sharpe": 1.2}}}


def test_compare_of_json_nested_past_the_parsers_depth_is_one_line_not_a_recursion_error(tmp_path, capsys):
    good = tmp_path / "eager.json"
    good.write_text(json.dumps(BACKTEST))
    deep = tmp_path / "compiled.json"  # a file that quotes itself over and over
    deep.write_text('{"symbol": "SP500", "strategies": {"maxdiff": {"return": 0.1}}, "metrics": '
                    + '{"again": ' * 50_000 + "1" + "}" * 50_000 + "}")
    assert main(["compile", "compare", str(good), str(deep)]) == 2
    assert one_line(capsys) == (f"error: {deep}: JSON nested deeper than can be read (a file that embeds itself?); "
                                "a backtest JSON is a few levels deep: pass the one `marketcast backtest --json` "
                                "wrote")


def test_compare_of_a_link_to_itself_is_one_line(tmp_path, capsys):
    good = tmp_path / "eager.json"
    good.write_text(json.dumps(BACKTEST))
    loop = tmp_path / "baseline.json"
    loop.symlink_to(loop.name)
    assert main(["compile", "compare", str(loop), str(good)]) == 2
    assert one_line(capsys) == (f"error: {loop}: a symbolic link that points back at itself (a loop); pass the "
                                "backtest JSON file itself")
