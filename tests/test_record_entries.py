"""Typed record entries (podstate.facts.record): one class per kind, parsed where a record's
line is read, written back byte for byte, read by name."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from podstate.facts import made
from podstate.facts.record import (
    ENTRIES,
    BlockEntry,
    DirEntry,
    Entry,
    FileEntry,
    MountEntry,
    RepoEntry,
    SavedEntry,
    parse_entry,
)
from podstate.shell import b64

PATHS = st.sampled_from(
    ["/etc/x", "/etc/x y", "~/.bashrc", "/workspace/.podstate/boot", "/scratch", "/é/ü", "apt:git"]
)
SUMS = st.one_of(
    st.just("-"),
    st.lists(st.text(max_size=5), min_size=1, max_size=3).map(lambda t: made.sums(*t)),
)
MARKS = st.sampled_from(["# >>> podstate >>>", "# <<< podstate <<<", "x y"]).map(b64)


def _entries(path: str) -> st.SearchStrategy[Entry]:
    """Return every kind of entry at ``path``, with the fields podstate writes."""
    copy = b64(f"/etc/podstate/saved/{len(path)}")
    owned = st.sampled_from([(None, None), ("600", "5:6")])
    return st.one_of(
        SUMS.map(lambda s: FileEntry(path, s)),
        st.tuples(SUMS, owned).map(lambda t: SavedEntry(path, t[0], copy, *t[1])),
        st.tuples(MARKS, MARKS, st.booleans()).map(lambda t: BlockEntry(path, *t)),
        st.booleans().map(lambda f: DirEntry(path, f)),
        st.booleans().map(lambda f: MountEntry(path, f)),
        st.booleans().map(lambda f: RepoEntry(path, f)),
        st.sampled_from([k(path) for k in ENTRIES.values() if k.parse(path, ()) is not None]),
    )


RECORDS = st.lists(PATHS, unique=True, max_size=6).flatmap(
    lambda paths: st.tuples(*(_entries(p) for p in paths)).map(list)
)


@settings(max_examples=300, deadline=None)
@given(RECORDS, st.sampled_from([None, "C.1/2", "pod id"]))
def test_a_record_reads_back_as_its_entries_and_writes_back_byte_for_byte(entries, pod_id):
    text = made.render("pod-1", pod_id, entries)
    record = made.parse_record(text)
    assert record.problem is None
    assert record.entries == {e.path: e for e in entries}
    assert made.render("pod-1", pod_id, list(record.entries.values())) == text


def test_each_kind_is_a_class_of_its_own_named_in_the_records_kinds():
    assert tuple(ENTRIES) == made.KINDS and len(set(ENTRIES.values())) == len(made.KINDS)
    assert all(kind.kind == name for name, kind in ENTRIES.items())


def test_fields_are_read_by_name():
    saved = parse_entry("saved", "/etc/x", ("s1,s2", b64("/etc/podstate/saved/x"), "600", "5:6"))
    assert isinstance(saved, SavedEntry)
    assert (saved.copy, saved.mode, saved.owner) == ("/etc/podstate/saved/x", "600", "5:6")
    assert saved.sums == ("s1", "s2")
    old = parse_entry("saved", "/etc/x", ("-", "=/etc/podstate/saved/x"))
    assert isinstance(old, SavedEntry) and (old.mode, old.owner, old.sums) == (None, None, ())
    block = parse_entry("block", "~/.bashrc", (b64("a"), b64("b"), "created"))
    assert isinstance(block, BlockEntry) and block.marks == ("a", "b") and block.created
    repo = parse_entry("repo", "/r", ("emptied",))
    assert isinstance(repo, RepoEntry) and repo.emptied
    assert parse_entry("mount", "/m", ()) == MountEntry("/m", False)


def test_a_line_with_words_its_kind_does_not_have_makes_the_record_unreadable():
    assert parse_entry("dir", "/d", ("made",)) is None
    assert parse_entry("file", "/f", ()) is None
    assert parse_entry("saved", "/f", ("s", "c", "600")) is None
    assert parse_entry("secrets", "/etc/podstate/secrets/env.sh", ("x",)) is None
    assert parse_entry("nothing", "/x", ()) is None
    text = "podstate-made 1\npod =p -\ndir =/d scratch\nmount =/m made extra\n"
    assert made.parse_record(text).problem == "it has an entry podstate cannot read (mount)"
