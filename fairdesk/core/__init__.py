"""Headless core of FairDesk. Never imports Qt."""
