"""The window shell: the application object, the main window (composition only), background jobs."""
