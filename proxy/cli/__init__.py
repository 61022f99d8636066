"""The command line: `mrtr-proxy serve | keygen | check-config | probe` (`main.py`), its key helpers."""
