"""TVM's ``te.create_schedule`` names the Ingot way (create_prim_func + tir.Schedule)."""
import pytest

from ingot import te


def test_create_schedule_names_create_prim_func_and_schedule():
    with pytest.raises(te.RemovedSpellingError, match=r"create_prim_func.*Schedule") as info:
        te.create_schedule  # noqa: B018 (the attribute access is the test)
    assert isinstance(info.value, AttributeError)


def test_unknown_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'") as info:
        te.no_such_thing  # noqa: B018 (the attribute access is the test)
    assert not isinstance(info.value, te.RemovedSpellingError)
