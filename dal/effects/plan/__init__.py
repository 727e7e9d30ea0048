"""What a command is: the shell text parsed into DAL's own plan, and the paths it names resolved."""
