"""A param or launch value may not take a name every expression reads already: a grouped GEMM's groups (as batch and
M) would be shown in the label while the launch read the built-in one."""

from __future__ import annotations

import pytest

from malformed import MINIMAL, refused


@pytest.mark.parametrize("name", ["groups", "batch"])
def test_a_value_named_as_a_built_in_count_is_refused(tmp_path, monkeypatch, capsys, name):
    refused(tmp_path, MINIMAL + f"    values: {{{name}: 4}}\n", monkeypatch, capsys,
            field=f"kernels[v4].values.{name}", message="a value's name is a C identifier other than")


def test_a_param_named_groups_is_refused(tmp_path, monkeypatch, capsys):
    error = refused(tmp_path, MINIMAL.replace("TN: 4}", "TN: 4, groups: 4}"), monkeypatch, capsys,
                    field="kernels[v4].params.groups")
    assert "groups" in error.message.split("other than", 1)[1]
