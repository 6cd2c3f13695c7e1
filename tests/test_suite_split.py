"""The README's `pytest` leaves the slow files out and `pytest -m slow` runs them
(tests/conftest.py SLOW_FILES): the list names files that exist, and every browser test
file is on it."""

from __future__ import annotations

from pathlib import Path

from conftest import SLOW_FILES

TESTS = Path(__file__).resolve().parent


def test_every_slow_file_exists():
    assert sorted(name for name in SLOW_FILES if not (TESTS / name).is_file()) == []


def test_every_browser_test_file_is_slow():
    browser = {path.name for path in TESTS.glob("test_*_browser.py")}
    assert browser and browser <= SLOW_FILES, sorted(browser - SLOW_FILES)
