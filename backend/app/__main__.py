"""``python -m backend.app``: print the settings table that docs/server.md holds."""

from backend.app.settings import settings_table

if __name__ == "__main__":
    print(settings_table(), end="")
