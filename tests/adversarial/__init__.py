"""The adversarial suite: hostile input on every surface, table-driven.

Each `test_*.py` holds one surface (tool arguments, HTTP responses, the codec server, MCP
servers, the terminal, …) and its cases as a list of `Hostile` rows: an id, the input, and
what must come out. Each case asserts its clear outcome, that nothing already stored
changed (`StoreSnapshot`: the rows' contents, not their counts) and that no workflow task it
caused is left failing (`assert_no_failed_tasks`).

Adding a case is adding a row: append a `Hostile(...)` to the table of its surface. Rows that
need a new kind of fixture (a server route, a scripted reply) name it in the row; look at the
table's docstring for what its rows may hold. `HOSTILE_TABLES` in `tests/adversarial/cases.py`
counts every table's rows (the suite's size is reported from it).
"""
