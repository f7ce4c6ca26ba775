"""Launch settings: the settings dialog, the engine-aware launch form, presets, the memory bar."""
