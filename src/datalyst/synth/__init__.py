"""Task synthesis: questions about real data files, with answers computed by running code where possible."""

from datalyst.synth.taxonomy import CATEGORIES, Category, category

__all__ = ["CATEGORIES", "Category", "category"]
