"""absa_lib.data.download: pinned files, atomic download with fallback, verification messages.

No real network: downloads come from a local HTTP server on 127.0.0.1 (or file:// URLs) that
serves the small fixture files, with pins computed for those fixtures.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import re
import threading
from functools import partial
from pathlib import Path
from typing import ClassVar

import pytest

from absa_lib.data import download as DL
from absa_lib.errors import AbsaError

RAW = ("sentihood/sentihood-train.json", "sentihood/sentihood-dev.json", "sentihood/sentihood-test.json",
       "semeval2014/Restaurants_Train.xml", "semeval2014/Restaurants_Test_Gold.xml")


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self):                        # http.server's naming
        _Handler.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):            # keep pytest output clean
        pass


@pytest.fixture
def server(fixtures_dir):
    """Base URL of a local server for tests/fixtures/data, and the list of paths it was asked for."""
    _Handler.requests = []
    handler = partial(_Handler, directory=str(fixtures_dir / "data"))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", _Handler.requests
    httpd.shutdown()
    httpd.server_close()


def _pins(fixtures_dir: Path, base: str, **change) -> tuple[DL.DataFile, ...]:
    """Pinned entries for the fixture files served at ``base`` (``change`` overrides fields of all)."""
    out = []
    for rel in RAW:
        blob = (fixtures_dir / "data" / rel).read_bytes()
        fields = {"path": rel, "url": base + rel, "alt_url": None, "sha256": hashlib.sha256(blob).hexdigest(),
                  "size": len(blob), "dataset": "sentihood" if "sentihood" in rel else "semeval"}
        fields.update(change)
        out.append(DL.DataFile(**fields))
    return tuple(out)


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------------------------
# the registry


def test_registry_matches_the_shared_checksums(real_data_dir):
    sums = dict(reversed(line.split()) for line in (real_data_dir / "SHA256SUMS").read_text().splitlines())
    assert {f.path: f.sha256 for f in DL.FILES} == sums
    for f in DL.FILES:
        assert (real_data_dir / f.path).stat().st_size == f.size
        assert f.url.startswith("https://raw.githubusercontent.com/") and "/" + f.path.split("/")[-1] in f.url
        assert f.optional == ("nli_m" in f.path) and (f.alt_url is None) == f.optional
    assert [f.path for f in DL.FILES if not f.optional] == list(RAW)
    assert list(DL.dataset_checksums("semeval")) == list(RAW[3:])


def test_verify_real_data(real_data_dir):
    assert set(DL.verify(real_data_dir).values()) == {"ok"} and len(DL.verify(real_data_dir)) == 10


# ----------------------------------------------------------------------------------------------
# verification messages


def test_verify_reports_missing_truncated_and_corrupted(tmp_path, real_data_dir):
    message = (r"sentihood-train\.json is missing \(expected 1,013,925 bytes, sha256 46bb48d0[0-9a-f]{56}\); "
               r"run `absa data download` \(it fetches every missing or bad file\) or set ABSA_DATA_DIR .*"
               r"\[and 4 more bad file\(s\): sentihood/sentihood-dev\.json, sentihood/sentihood-test\.json, "
               r"semeval2014/Restaurants_Train\.xml, semeval2014/Restaurants_Test_Gold\.xml\]$")
    with pytest.raises(AbsaError, match=message) as err:
        DL.verify(tmp_path)
    assert "\n" not in str(err.value)
    for rel in RAW:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((real_data_dir / rel).read_bytes())
    assert DL.verify(tmp_path)["sentihood/nli_m/dev_NLI_M.tsv"] == "absent (optional)"
    dev = tmp_path / "sentihood/sentihood-dev.json"
    good = dev.read_bytes()
    dev.write_bytes(good[:1000])
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is too short \(truncated or edited\): 1,000 bytes, expected 252,786"):
        DL.verify(tmp_path)
    dev.write_bytes(good + b"\n")
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is too large \(edited, or another file\): 252,787 bytes"):
        DL.verify(tmp_path)
    dev.write_bytes(good.replace(b"Positive", b"Negative", 1))
    with pytest.raises(AbsaError, match=r"sentihood-dev\.json is corrupted or modified: sha256 [0-9a-f]{64}, "
                                        r"expected f0262cbe"):
        DL.verify(tmp_path)
    dev.write_bytes(good)
    nli = tmp_path / "semeval2014/nli_m/test_NLI_M.csv"      # optional, but checked when present
    nli.parent.mkdir()
    nli.write_text("3121\tnone\tprice\tx\n")
    with pytest.raises(AbsaError, match=r"test_NLI_M\.csv is too short"):
        DL.verify(tmp_path)


def test_check_is_cached_by_mtime_and_size(tmp_path, fixtures_dir, monkeypatch, server):
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, server[0]))
    DL.download(tmp_path)
    DL.verified_path(RAW[1], tmp_path)
    path = tmp_path / RAW[1]
    assert DL._VERIFIED[path] == (path.stat().st_mtime_ns, path.stat().st_size)
    path.write_text("[]")                                    # a change invalidates the cached result
    with pytest.raises(AbsaError, match="truncated"):
        DL.verified_path(RAW[1], tmp_path)


# ----------------------------------------------------------------------------------------------
# downloads from a local server


def test_download_success_then_nothing_to_do(tmp_path, fixtures_dir, monkeypatch, server):
    base, requests = server
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, base))
    assert DL.download(tmp_path) == {rel: "downloaded" for rel in RAW}
    assert _leftovers(tmp_path) == sorted(RAW)               # no temporary files left
    for rel in RAW:
        assert (tmp_path / rel).read_bytes() == (fixtures_dir / "data" / rel).read_bytes()
    assert DL.verify(tmp_path) == {rel: "ok" for rel in RAW}
    assert len(requests) == 5
    assert DL.download(tmp_path) == {rel: "ok" for rel in RAW} and len(requests) == 5
    assert DL.download(tmp_path, force=True) == {rel: "downloaded" for rel in RAW} and len(requests) == 10


def test_checksum_mismatch_leaves_nothing(tmp_path, fixtures_dir, monkeypatch, server):
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, server[0], sha256="0" * 64))
    message = (r"could not download sentihood/sentihood-train\.json \(723 bytes, sha256 0{64}\): "
               r"http://127\.0\.0\.1:\d+/sentihood/sentihood-train\.json: sha256 [0-9a-f]{64}, "
               r"expected 0{64}; check the network, or place the file at "
               + re.escape(str(tmp_path / "sentihood" / "sentihood-train.json")) + r" yourself .*ABSA_DATA_DIR")
    with pytest.raises(AbsaError, match=message):
        DL.download(tmp_path)
    assert _leftovers(tmp_path) == []


def test_failed_forced_download_keeps_the_good_file(tmp_path, fixtures_dir, monkeypatch, server):
    base = server[0]
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, base))
    DL.download(tmp_path)
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, base + "nowhere/"))        # every URL gives 404
    with pytest.raises(AbsaError, match=r"could not download .*HTTP Error 404"):
        DL.download(tmp_path, force=True)
    assert DL.verify(tmp_path) == {rel: "ok" for rel in RAW} and _leftovers(tmp_path) == sorted(RAW)


def test_truncated_response_and_alternative_url(tmp_path, fixtures_dir, monkeypatch, server):
    base = server[0]
    pins = _pins(fixtures_dir, base)
    longer = tuple(DL.DataFile(**{**f.__dict__, "size": f.size + 10}) for f in pins)   # the server sends less
    monkeypatch.setattr(DL, "FILES", longer)
    with pytest.raises(AbsaError, match=r"got 723 bytes, expected 733"):
        DL.download(tmp_path)
    assert _leftovers(tmp_path) == []
    broken_primary = tuple(DL.DataFile(**{**f.__dict__, "url": base + "missing/" + f.path, "alt_url": f.url})
                           for f in pins)
    monkeypatch.setattr(DL, "FILES", broken_primary)
    assert DL.download(tmp_path) == {rel: "downloaded" for rel in RAW}
    assert server[1][-1] == "/" + RAW[-1] and server[1][-2] == "/missing/" + RAW[-1]


def test_file_urls_and_optional_files(tmp_path, fixtures_dir, monkeypatch):
    pins = _pins(fixtures_dir, (fixtures_dir / "data").as_uri() + "/")
    optional = DL.DataFile(**{**pins[0].__dict__, "path": "sentihood/nli_m/x.json", "optional": True})
    monkeypatch.setattr(DL, "FILES", pins + (optional,))
    assert DL.download(tmp_path) == {rel: "downloaded" for rel in RAW}
    assert DL.verify(tmp_path)["sentihood/nli_m/x.json"] == "absent (optional)"
    assert DL.download(tmp_path, nli_m=True)["sentihood/nli_m/x.json"] == "downloaded"


def test_cli_handlers(tmp_path, fixtures_dir, monkeypatch, capsys, server):
    from absa_lib.commands import data as cmd

    parser = argparse.ArgumentParser(prog="absa")
    cmd.add_parser(parser.add_subparsers(dest="command"))
    monkeypatch.setattr(DL, "FILES", _pins(fixtures_dir, server[0]))

    def run(*argv: str) -> int:
        args = parser.parse_args(list(argv))
        return args.func(args)

    with pytest.raises(AbsaError, match="is missing"):
        run("data", "verify", "--data-dir", str(tmp_path))
    assert run("data", "download", "--data-dir", str(tmp_path)) == 0
    assert "downloaded" in capsys.readouterr().out
    assert run("data", "verify", "--data-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert out.count("ok") == 5 and str(tmp_path) in out
