"""The winners of a sweep, now in `driver_gemm.tune.winners`; kept so that existing imports still work."""

from ..tune.winners import Pick, pick_winners, winners_spec

__all__ = ["Pick", "pick_winners", "winners_spec"]
