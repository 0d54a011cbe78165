"""Plain functions, one module per resource: the rules. They own the transaction."""
