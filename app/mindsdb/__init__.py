"""The MindsDB SQL adapter: parse a statement, call a service, shape the answer as MindsDB does."""
