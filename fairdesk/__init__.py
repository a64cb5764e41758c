"""FairDesk: offline fairness audits of medical ML models.

The package is layered GUI -> jobs -> core; ``fairdesk.core`` never imports Qt and keeps heavy libraries
(scipy, scikit-learn, torch) inside the functions that need them so that start-up stays fast.
"""

__version__ = "0.1.0"
