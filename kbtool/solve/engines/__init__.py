"""Serving engines behind one contract (base.py), listed in registry.py; one folder per engine (vllm/, sglang/)."""
