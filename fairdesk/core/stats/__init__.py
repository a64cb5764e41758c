"""Statistics: resampling, multiple testing. Thin over numpy and scipy."""
