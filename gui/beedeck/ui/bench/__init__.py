"""The benchmark dialog, its results view and charts."""
