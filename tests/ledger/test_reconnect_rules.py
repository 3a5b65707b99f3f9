"""Every operation of the SQL ledgers that opens a transaction of its own is
run again after a lost connection or a lost conflict: a worker's chunk
task that met one unretried read (the run's sending rules, once) failed,
and its message, acknowledged anyway, left the chunk planned for ever."""

from __future__ import annotations

import inspect

from campaignkit.ledger._store import SqlLedger


def test_every_transaction_of_its_own_is_retried() -> None:
    unretried = []
    for name in dir(SqlLedger):
        function = getattr(SqlLedger, name)
        if not inspect.iscoroutinefunction(function):
            continue
        if "self._transaction()" in inspect.getsource(function) and not hasattr(function, "retry"):
            unretried.append(name)
    assert unretried == []
