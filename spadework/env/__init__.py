"""The environment contract and the parsers on both sides of it."""
