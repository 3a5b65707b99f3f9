"""Every operation of a ledger that opens a transaction of its own is run
again after a lost connection or a lost conflict: a worker's chunk task
that met one unretried read (the run's sending rules, once) failed, and its
message, acknowledged anyway, left the chunk planned for ever."""

from __future__ import annotations

import inspect

from campaignkit.ledger import Ledger


def test_every_transaction_of_its_own_is_retried() -> None:
    opening = [
        name
        for name in dir(Ledger)
        if inspect.iscoroutinefunction(function := getattr(Ledger, name))
        and "self.store.transaction(" in inspect.getsource(function)
    ]
    assert "plan" in opening  # the test sees the transactions it checks
    assert [name for name in opening if not hasattr(getattr(Ledger, name), "retry")] == []
