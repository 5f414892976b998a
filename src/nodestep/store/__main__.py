"""The stores' command line: ``python -m nodestep.store COMMAND ...``.

``postgres-schema`` creates the tables of ``PostgresStateStore`` ahead of time, for a
database whose application role may not create tables (``create_schema=False``)::

    python -m nodestep.store postgres-schema postgresql://admin@db/app [--schema NAME]

or prints the SQL to apply by hand with ``--print``. Both are idempotent. Exit codes: 0 done,
1 the server refused or cannot be reached (or psycopg is missing), 2 a usage error.
"""

from __future__ import annotations

import argparse
import sys

from nodestep.store._sql.postgres import create_tables, safe, schema_sql

__all__ = ["main"]

PROG = "python -m nodestep.store"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return its exit code."""
    parser = argparse.ArgumentParser(prog=PROG, description="nodestep's stores.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    schema = commands.add_parser(
        "postgres-schema",
        help="create the tables of PostgresStateStore ahead of time",
        description="Create the tables of nodestep's PostgresStateStore ahead of time.",
    )
    schema.add_argument("dsn", nargs="?", help="the database, e.g. postgresql://user@host/db")
    schema.add_argument("--schema", default="public", help="the schema (default: public)")
    schema.add_argument("--print", action="store_true", help="print the SQL, run nothing")
    args = parser.parse_args(argv)
    if args.print:
        print(schema_sql(args.schema).strip())
        return 0
    if not args.dsn:
        schema.error("give the database's dsn, or --print to see the SQL")
    try:
        create_tables(args.dsn, args.schema)
    except ImportError as e:
        # Its message names the extra to install; the advice below (the dsn, the server,
        # the role) would send the reader to the wrong place.
        print(f"{PROG} postgres-schema: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # psycopg's errors: the server refused or cannot be reached
        print(
            f"{PROG} postgres-schema: cannot create the tables in schema {args.schema!r} of "
            f"{safe(args.dsn)}: {type(e).__name__}: {e}. Check the dsn, that the server "
            f"runs, and that this role may create tables there.",
            file=sys.stderr,
        )
        return 1
    print(f"nodestep tables are ready in schema {args.schema!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
