"""marshmallow schemas, one module per resource; input and output schemas apart."""
