"""The window shell: the application object, the main window (it lays out views and renders the session),
its menus and small dialogs (connect, agents, about, shortcuts), the starter banner, themes, screenshots."""
