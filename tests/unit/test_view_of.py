"""`view_of` makes a view from a domain record: each field from the attribute of the same
name, the differing ones given, a None left out where the view's field takes no null."""

from __future__ import annotations

import msgspec

from payroll_sandbox.domain.shapes import UNSET, Maybe, View, view_of


class Record(msgspec.Struct):
    name: str
    note: str | None = None
    nullable: str | None = None

    @property
    def shout(self) -> str:
        return self.name.upper()


class Plain:
    def __init__(self, name: str, note: str | None) -> None:
        self.name, self.note = name, note


class Shown(View, kw_only=True):
    name: str
    shout: Maybe[str] = UNSET
    note: Maybe[str] = UNSET
    nullable: str | None = None
    extra: Maybe[int] = UNSET
    label: Maybe[str] = UNSET


def test_fields_come_from_attributes_properties_and_the_differing_ones():
    view = view_of(Shown, Record("ann", note="hi"), label="x")
    assert view == Shown(name="ann", shout="ANN", note="hi", label="x")
    assert msgspec.json.decode(msgspec.json.encode(view)) == {
        "name": "ann", "shout": "ANN", "note": "hi", "label": "x"}  # a default left out


def test_a_none_is_left_out_only_where_the_field_takes_no_null():
    view = view_of(Shown, Record("ann"), label=None)
    assert view.note is UNSET and view.label is UNSET and view.nullable is None


def test_a_record_without_the_attribute_leaves_the_field_out_and_unknown_differing_are_ignored():
    view = view_of(Shown, Plain("bo", None), not_a_field=1)
    assert msgspec.json.decode(msgspec.json.encode(view)) == {"name": "bo"}
    assert view_of(Shown, Plain("cy", "yo")).note == "yo"


def test_the_same_call_site_gives_each_record_its_own_values():
    first, second = (view_of(Shown, Record(name), extra=number)
                     for number, name in enumerate(("a", "b")))
    assert (first.name, first.extra, second.name, second.extra) == ("a", 0, "b", 1)
