"""Statistics the audits share: rate gaps and their tests, resampling, multiple testing, calibration and
discrimination by group, thresholds and operating points, and the region where each test was verified.
Thin over numpy and scipy."""
