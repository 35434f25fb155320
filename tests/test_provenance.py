"""Which code a result passed through: the content hash the workflow's rules rerun on."""
from tcpeval import provenance


def test_the_sources_hash_follows_the_matched_files_contents_and_names_and_nothing_else(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "report" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not code")
    patterns = ("*.py", "report/*.py")
    first = provenance.sources_hash(tmp_path, patterns)
    assert provenance.sources_hash(tmp_path, patterns) == first
    (tmp_path / "notes.txt").write_text("changed, but not matched")
    assert provenance.sources_hash(tmp_path, patterns) == first
    (tmp_path / "report" / "b.py").write_text("y = 3\n")
    changed = provenance.sources_hash(tmp_path, patterns)
    assert changed != first
    (tmp_path / "report" / "b.py").rename(tmp_path / "report" / "c.py")   # same bytes, another module
    assert provenance.sources_hash(tmp_path, patterns) not in (first, changed)
