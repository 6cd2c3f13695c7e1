"""The start-up cache of the read-only load (loadcache.py): a second start with the same
files reads what the first built; any changed byte is a new load; a wrong fixture, a
damaged or foreign cache file and a folder that cannot be written only mean loading from
the files; the folder keeps at most KEPT_LOADS loads."""

from __future__ import annotations

import pickle
import shutil
import sys
from itertools import islice
from pathlib import Path

import pytest

from payroll_sandbox.load import loadcache, loading
from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.settings import Settings, bundled_dir


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def settings(tmp_path) -> Settings:
    """The bundled fixtures and scenarios, in copies a test may change."""
    shutil.copytree(bundled_dir("fixtures"), tmp_path / "fixtures")
    (tmp_path / "scenarios").mkdir()
    return Settings(fixtures=tmp_path / "fixtures", scenarios=tmp_path / "scenarios")


@pytest.fixture
def builds(monkeypatch) -> list[Settings]:
    """The loads made from the files (not read from the cache), in order."""
    made: list[Settings] = []
    from_files = loading._from_files

    def counted(settings, folders):
        made.append(settings)
        return from_files(settings, folders)

    monkeypatch.setattr(loading, "_from_files", counted)
    return made


def kept(cache: Path) -> list[Path]:
    return sorted(cache.glob(f"{loadcache.PREFIX}*.pickle"))


def summary(loaded: loading.LoadedFixtures) -> tuple:
    """What a start reads from a load: companies, scenarios, accounts and a search."""
    return ([(c.id, c.name, c.status) for c in loaded.catalog.ordered],
            {name: (s.kind, s.products, len(s.steps)) for name, s in loaded.scenarios.items()},
            loaded.fixtures.accounts, loaded.fixtures.service,
            [company.id for _, company in islice(loaded.index.ranked("walmrt"), 5)])


def test_a_second_load_with_the_same_files_is_read_from_the_cache(cache, settings, builds):
    first = loading.load(settings)
    assert len(builds) == 1 and len(kept(cache)) == 1
    second = loading.load(settings)
    assert len(builds) == 1  # nothing built: read back
    assert summary(second) == summary(first)
    assert second.fixtures.directory == settings.fixtures
    assert next(second.index.ranked("walmrt"))[1].name == "Walmart"  # typos, read back


def test_a_changed_byte_an_added_scenario_or_other_names_are_a_new_load(cache, settings,
                                                                         builds):
    before = loading.load(settings)
    companies = settings.fixtures / "companies.yaml"
    text = companies.read_text()
    assert "name: Walmart," in text
    companies.write_text(text.replace("name: Walmart,", "name: Walmarx,", 1))  # same size
    changed = loading.load(settings)
    assert len(builds) == 2
    assert "Walmarx" in {c.name for c in changed.catalog.ordered}
    assert "Walmarx" not in {c.name for c in before.catalog.ordered}

    shutil.copy(bundled_dir("scenarios") / "happy-path.yaml",
                settings.scenarios / "my-own.yaml")
    assert "my-own" in loading.load(settings).scenarios
    assert len(builds) == 3

    renamed = loading.load(Settings(fixtures=settings.fixtures, scenarios=settings.scenarios,
                                    vendor="Othervendor"))
    assert renamed.fixtures.service.vendor == "Othervendor" and len(builds) == 4
    assert loading.load(settings).fixtures.service.vendor != "Othervendor"
    assert len(builds) == 4  # the earlier load, still kept


def test_an_edited_module_of_the_package_is_a_new_load(cache, settings, builds, monkeypatch):
    loading.load(settings)
    code = list(loadcache._code())
    assert any(name.endswith("catalog.py") for name, _, _ in code)
    edited = [(name, size + 1, changed) for name, size, changed in code]
    monkeypatch.setattr(loadcache, "_code", lambda: iter(edited))
    loading.load(settings)
    assert len(builds) == 2


def test_a_wrong_fixture_is_refused_on_every_start_and_never_kept(cache, settings, builds):
    (settings.fixtures / "service.yaml").write_text("vendor: [not, a, name]\n")
    for _ in range(2):
        with pytest.raises(ConfigError) as refused:
            loading.load(settings)
        assert refused.value.file == str(settings.fixtures / "service.yaml")
    assert len(builds) == 2 and kept(cache) == []


def test_a_damaged_cache_file_is_built_again_and_replaced(cache, settings, builds):
    expected = summary(loading.load(settings))
    [path] = kept(cache)
    path.write_bytes(b"\x80\x05not a pickle")
    assert summary(loading.load(settings)) == expected
    assert len(builds) == 2
    assert summary(loading.load(settings)) == expected
    assert len(builds) == 2  # the rewritten file reads back


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
def test_a_cache_file_another_user_could_write_is_not_unpickled(cache, settings, builds):
    loading.load(settings)
    [path] = kept(cache)
    path.chmod(0o666)
    loading.load(settings)
    assert len(builds) == 2  # built from the files, not read


def test_off_or_a_folder_that_cannot_be_written_changes_nothing(tmp_path, settings, builds,
                                                                monkeypatch):
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", "off")
    monkeypatch.chdir(tmp_path)
    expected = summary(loading.load(settings))
    assert not (tmp_path / "off").exists()  # `off` is no folder name: nothing is written
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", str(blocker / "cache"))
    assert summary(loading.load(settings)) == expected
    assert summary(loading.load(settings)) == expected
    assert len(builds) == 3  # nothing was kept anywhere
    assert not (blocker.parent / "cache").exists()


def test_the_cache_folder_keeps_at_most_kept_loads(cache):
    for number in range(loadcache.KEPT_LOADS + 4):
        assert loadcache.cached(iter(()), ("case", number), lambda: number, int) == number
    survivors = [pickle.loads(path.read_bytes())[0] for path in kept(cache)]  # (load, pools)
    assert len(set(survivors)) == loadcache.KEPT_LOADS  # whole files, one per load


def test_word_pools_read_again_are_checked_once_and_at_most_checked_kept_are_kept(cache):
    """Every app reads the word pools' file again; the same bytes are checked once in a
    process (pools.CHECKED_KEPT contents at most), and other bytes are checked anew."""
    from payroll_sandbox.load import pools

    drawn: list[int] = []

    def draw(fake, size: int) -> dict[str, list[str]]:
        drawn.append(size)
        return {"words": [f"Word{n}" for n in range(size)]}

    drawn_first = pools.faker_pools("bound-test", 1, 3, draw)  # drawn and written
    first = pools.faker_pools("bound-test", 1, 3, draw)  # read back and checked
    assert first == drawn_first
    assert pools.faker_pools("bound-test", 1, 3, draw) is first  # read again, not checked again
    assert drawn == [3]
    for size in range(4, 5 + pools.CHECKED_KEPT):  # other files: each checked, the first go
        assert pools.faker_pools("bound-test", 1, size, draw) == draw(None, size)
        assert pools.faker_pools("bound-test", 1, size, draw)["words"][-1] == f"Word{size - 1}"
    assert len(pools._CHECKED) <= pools.CHECKED_KEPT
    assert first not in pools._CHECKED.values()
    (path,) = cache.glob("bound-test-1-3-*.json")
    path.write_text('{"words": ["<b>planted</b>"]}')  # other bytes: checked, refused, drawn
    assert pools.faker_pools("bound-test", 1, 3, draw) == first
