"""docs/configuration.md documents every key the binary knows, with the
binary's default."""
import re
import subprocess

from conftest import CASSINID, SOURCE_DIR


def test_every_key_is_documented_with_its_default():
    out = subprocess.run([str(CASSINID), "--help-config"], capture_output=True,
                         text=True, check=True).stdout
    doc = (SOURCE_DIR / "docs" / "configuration.md").read_text()
    rows = {}
    for line in doc.splitlines():
        m = re.match(r"\| `([a-z0-9_.]+)` \| [^|]+ \| `([^`]*)` \|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    keys = [l.split("\t") for l in out.splitlines()]
    assert len(keys) > 40
    for name, _type, default, _range, _doc in keys:
        assert name in rows, f"{name} is not in docs/configuration.md"
        assert rows[name] == default, \
            f"{name}: docs say {rows[name]!r}, cassinid says {default!r}"
    assert set(rows) == {k[0] for k in keys}, "docs list unknown keys"


def test_sample_config_is_valid():
    r = subprocess.run([str(CASSINID), "-c", str(SOURCE_DIR / "conf"),
                        "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
