"""Stores: the interface (base), the memory engine and the Redis engine."""
