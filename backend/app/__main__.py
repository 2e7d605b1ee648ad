"""``python -m backend.app``: print the settings tables that docs/settings.md holds."""

from backend.app.core.settings_table import settings_table

if __name__ == "__main__":
    print(settings_table(), end="")
