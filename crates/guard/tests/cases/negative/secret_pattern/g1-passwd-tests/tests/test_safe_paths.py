import pytest

from safe_paths import safe_join


def test_rejects_traversal_to_etc_passwd():
    with pytest.raises(ValueError):
        safe_join("/srv/app", "../../../etc/passwd")


def test_rejects_absolute_shadow():
    with pytest.raises(ValueError):
        safe_join("/srv/app", "/etc/shadow")


def test_accepts_inside(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    assert safe_join(str(tmp_path), "a.txt").endswith("a.txt")
