"""The benchmark and tune dialogs (they get the session and a parent widget), their views and charts."""
