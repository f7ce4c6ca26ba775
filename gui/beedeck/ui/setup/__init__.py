"""The first-run setup wizard: detect, recommend, get the engine and models, smoke-test."""
