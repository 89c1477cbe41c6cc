"""Statistical families: every comparison in exactly one, the same Holm p wherever it is shown."""

import numpy as np
import pandas as pd
import pytest
from test_tables import frame, random_spec

from agentrepro.analysis import families
from agentrepro.analysis import tables as T
from agentrepro.analysis.claims import claims_table
from agentrepro.analysis.paired import holm


def _tables(claims):
    spec = random_spec(
        np.random.default_rng(5), methods=("a", "b", "c", "d"), steps=(0, 10), items=40, p=(0.8, 0.6, 0.5, 0.45)
    )
    df = frame(spec)
    paired = T.paired_table(df, ["a", "b", "c", "d"], rng=np.random.default_rng(0), n_boot=100)
    learning = T.learning_table(df, ["a", "b", "c", "d"], 10, rng=np.random.default_rng(0), n_boot=100)
    claim_rows = claims_table(claims, paired, df[df.step == 10], ["a", "b", "c", "d"], 10, 0.05, field="claims[{i}]")
    paired = families.join_claims(paired, claim_rows, 10)
    return {"paired": paired, "learning": learning, "claims": claim_rows}


def test_a_claimed_pair_shows_the_claims_holm_p_and_leaves_its_pairs_family():
    """The pooled row a claim tests moves into the claims family with the claim's Holm p; the pairs it left are adjusted
    again over one comparison fewer."""
    t = _tables(["a > b", "c > d"])
    paired, claims = t["paired"], t["claims"]
    pooled = paired[(paired.seed == "all") & (paired.step == 10)]
    for claim in claims.itertuples():
        row = pooled[(pooled.method_a == claim.method_a) & (pooled.method_b == claim.method_b)].iloc[0]
        assert row.family == families.CLAIMS and row.p_holm == pytest.approx(claim.p_holm)
    rest = pooled[pooled.family != families.CLAIMS]
    assert set(rest.family) == {"pairs@10/all"} and len(rest) == 4
    assert rest.p_holm.to_numpy() == pytest.approx(holm(rest.p.to_numpy()))
    assert claims.p_holm.to_numpy() == pytest.approx(holm(claims.p.to_numpy()))


def test_families_table_declares_each_family_once_with_its_size():
    """One row per family, its size the number of rows carrying its key, a label that says what it holds."""
    t = _tables(["a > b"])
    table = families.families_table(t, 10)
    assert table.family.is_unique
    sizes = pd.concat([t["paired"].family, t["learning"].family]).value_counts()
    for row in table.itertuples():
        expected = len(t["claims"]) if row.family == families.CLAIMS else sizes[row.family]
        assert row.comparisons == expected
    label = table.set_index("family").label
    assert label["pairs@10/all"] == "the 5 method pairs at step 10, seeds pooled by task"
    assert label["learning@10/1"] == "the 4 methods against their own step 0 at step 10, seed 1"
    assert label[families.CLAIMS].startswith("the 1 ordering claim(s) declared before running")
