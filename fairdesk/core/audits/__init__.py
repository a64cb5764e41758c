"""Audit families: groups (gaps, error spread), and later mlm_bias, ctf, cit."""
