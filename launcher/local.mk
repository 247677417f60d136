# launcher
