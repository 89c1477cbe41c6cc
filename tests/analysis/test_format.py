"""Fractions in the data are shown as percentages; missing values are visibly missing."""

from agentrepro.analysis import format as fmt


def test_percentages_and_points():
    """Rates become percent, differences percentage points with a typographic minus."""
    assert fmt.pct(0.78906) == "78.9%"
    assert fmt.pp(-0.02) == "−2.0\u00a0pp"
    assert fmt.pp(0.1234) == "+12.3\u00a0pp"
    assert fmt.ci(-0.0191, 0.0153) == "[−1.9,\u00a01.5]"


def test_missing_values_show_a_dash():
    """None and NaN print an em dash in every formatter, never 'nan' or 'None'."""
    for name, f in fmt.FORMATS.items():
        if name in ("ci", "text", "verdict", "status"):
            continue
        assert f(None) == fmt.DASH
        assert f(float("nan")) == fmt.DASH
    assert fmt.ci(0.1, None) == fmt.DASH
    assert fmt.ci(float("nan"), 0.2) == fmt.DASH


def test_small_numbers_keep_their_digits():
    """Overhead shares near 0.04% and p-values below 0.001 stay readable."""
    assert fmt.share(0.0004) == "0.04%"
    assert fmt.share(0.25) == "25.0%"
    assert fmt.pvalue(0.0003) == "<0.001"
    assert fmt.pvalue(0.0456) == "0.046"
    assert fmt.seconds(0.0012) == "1.2\u00a0ms"
    assert fmt.seconds(3.4) == "3.4\u00a0s"
    assert fmt.number(5917) == "5,917"


def test_cell_formats_by_contract_kind():
    """A contract column's value is formatted by its kind; null shows the column's declared meaning or a dash."""
    from agentrepro.analysis.contract import Column

    assert fmt.cell(0.7891, Column("x", "rate")) == "78.9%"
    assert fmt.cell(0.0004, Column("x", "p?")) == "<0.001"
    assert fmt.cell(0.0012, Column("x", "seconds")) == "1.2\u00a0ms"
    assert fmt.cell(12345, Column("x", "int")) == "12,345"
    assert fmt.cell("grpo", Column("x", "str")) == "grpo"
    assert fmt.cell(None, Column("x", "num?", null="not reached")) == "not reached"
    assert fmt.cell(float("nan"), Column("x", "num?")) == "—"


def test_a_value_has_no_breakable_space():
    """Intervals, signed differences and durations hold no-break spaces only, so a line never splits them."""
    values = [fmt.ci(-0.129, 0.031), fmt.pp(-0.15), fmt.seconds(0.0012), fmt.seconds(4000), fmt.seconds(50000)]
    assert all(" " not in v and fmt.NBSP in v for v in values), values


def test_a_column_of_durations_has_one_unit():
    """Durations of one column are shown in the unit of its largest value: never '472 s' beside '15.0 min'."""
    column = [472.0, 900.0, 61.0]
    unit = fmt.unit_for(column)
    assert unit == "min"
    assert [fmt.seconds(s, unit) for s in column] == ["7.9\u00a0min", "15.0\u00a0min", "1.0\u00a0min"]
    assert fmt.unit_for([0.002, 0.5]) == "ms" and fmt.seconds(0.5, "ms") == "500\u00a0ms"
    assert fmt.unit_for([None, 3.0]) == "s" and fmt.unit_for([]) == "ms"
