"""Pure rules with no database: names and secrets. The lowest floor: imports only app.errors."""
