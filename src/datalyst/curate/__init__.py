"""Curation: from tasks to trajectories worth training on (sampling, judges, reflection, filters, strata, exports)."""

from datalyst.curate._records import KEEP, Check, Curated, Stratum, Verdict

__all__ = ["KEEP", "Check", "Curated", "Stratum", "Verdict"]
