"""outreach.campaigns.graph's pure rules: the stored graph read back, and the walk a
live edit makes through removed elements."""

from types import SimpleNamespace

from outreach.campaigns import graph


def row(position, key="", next_key="", branch=None, delay_minutes=0):
    return SimpleNamespace(
        position=position, key=key, next_key=next_key, branch=branch, delay_minutes=delay_minutes
    )


def branch_row(position, key, then, otherwise):
    condition = {"on": "opened", "of": "any", "within_minutes": 60, "then": then, "else": otherwise}
    return row(position, key, branch=condition)


def test_rows_without_next_lead_to_the_element_after_them():
    elements = graph.elements_from_rows([row(2, "b"), row(1, "a"), row(3, "", "end")])
    assert [(e.key, e.next) for e in elements] == [("a", "b"), ("b", "step_3"), ("step_3", "end")]


def test_an_edit_walks_removed_elements_to_a_kept_one_or_the_end():
    old = graph.elements_from_rows(
        [
            row(1, "a", "w"),
            branch_row(2, "w", then="b", otherwise="c"),
            row(3, "b", "end"),
            row(4, "c", "d"),
            row(5, "d", "end"),
        ]
    )
    new = [graph.Element("a", 1, "d"), graph.Element("d", 2, "end")]
    # w: its else (c, removed), then c's next: d. b: its next, the end.
    assert graph.edit_moves(old, new) == {"w": "d", "b": "end", "c": "d"}


def test_a_kept_key_of_another_kind_maps_to_itself():
    old = graph.elements_from_rows([row(1, "a", "b"), row(2, "b", "end")])
    new = [
        graph.Element("a", 1, "b"),
        graph.Element(
            "b",
            2,
            "",
            {"on": "opened", "of": "a", "within_minutes": 5, "then": "end", "else": "end"},
        ),
    ]
    assert graph.edit_moves(old, new) == {"b": "b"}


def test_a_walk_that_meets_a_key_twice_ends():
    """Rows made outside the API could close a loop; the walk ends rather than spin."""
    old = [graph.Element("x", 1, "y"), graph.Element("y", 2, "x")]
    assert graph.edit_moves(old, []) == {"x": "end", "y": "end"}
