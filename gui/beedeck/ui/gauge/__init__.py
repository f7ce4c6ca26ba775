"""The live speed gauge and its sparkline."""
