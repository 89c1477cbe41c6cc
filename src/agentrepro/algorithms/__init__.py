"""Advantage estimators (GRPO, GiGPO, GraphGPO, graph-only; PPO's GAE), their declarations (spec.py), the GraphGPO
state graph, and GAE.

Contract (docs/internals.md "Algorithms"): `StepBatch.from_rows`, `estimate(batch, name, **options)
-> AdvantageResult`, `ESTIMATORS`, `masked_gae`, `masked_whiten`, `turn_gae` (numpy inside; torch is
imported only when tensors are passed).
"""

from agentrepro.algorithms.batch import StepBatch
from agentrepro.algorithms.gae import masked_gae, masked_whiten, turn_gae
from agentrepro.algorithms.registry import ESTIMATORS, Registry, UnknownEstimator, default_registry, estimate
from agentrepro.algorithms.result import AdvantageResult
from agentrepro.algorithms.spec import SPECS, EstimatorSpec, Option

__all__ = [
    "ESTIMATORS",
    "SPECS",
    "AdvantageResult",
    "EstimatorSpec",
    "Option",
    "Registry",
    "StepBatch",
    "UnknownEstimator",
    "default_registry",
    "estimate",
    "masked_gae",
    "masked_whiten",
    "turn_gae",
]
