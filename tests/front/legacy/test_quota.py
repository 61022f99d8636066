"""SessionQuota: legacy sessions by principal and address, relayed ones forgotten after their TTL."""

from __future__ import annotations

from proxy.front.legacy.quota import SessionQuota


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_shares_per_principal_address_and_upstream() -> None:
    quota = SessionQuota(per_principal=2, per_address=3, clock=Clock())
    for i in range(2):
        assert quota.refusal("up", "p", "1.2.3.4", 10) is None
        quota.opened(f"t{i}", "up", "p", "1.2.3.4", None)
    assert "front.legacy_sessions_per_principal" in (quota.refusal("up", "p", "1.2.3.4", 10) or "")
    quota.opened("t2", "up", "q", "1.2.3.4", None)
    assert "front.legacy_sessions_per_address" in (quota.refusal("up", "r", "1.2.3.4", 10) or "")
    assert quota.refusal("up", "r", "5.6.7.8", 10) is None
    assert "pool.max_sessions" in (quota.refusal("up", "r", "5.6.7.8", 3) or "")
    quota.closed("t0")
    quota.closed("t0")  # twice: nothing more
    assert quota.refusal("up", "p", "1.2.3.4", 10) is None
    assert len(quota) == 2


def test_relayed_sessions_expire_unless_used() -> None:
    clock = Clock()
    quota = SessionQuota(per_principal=1, per_address=0, clock=clock)
    quota.opened("relay", "up", "p", "", 10)
    clock.now += 8
    quota.touch("relay", 10)
    clock.now += 8
    assert quota.refusal("up", "p", "", 10) is not None  # used 8 s ago: still held
    clock.now += 3
    assert quota.refusal("up", "p", "", 10) is None  # 11 s unused: forgotten
    assert len(quota) == 0


def test_an_upstreams_own_per_principal_cap() -> None:
    """pool.max_sessions_per_principal (4 for stdio): counted per upstream, named in the refusal."""
    quota = SessionQuota(per_principal=64, per_address=0, clock=Clock())
    for i in range(2):
        assert quota.refusal("kids", "p", "", 32, per_principal=2) is None
        quota.opened(f"t{i}", "kids", "p", "", None)
    refusal = quota.refusal("kids", "p", "", 32, per_principal=2) or ""
    assert (
        "this client holds 2 legacy sessions of upstream 'kids' (pool.max_sessions_per_principal)" in refusal
    )
    assert quota.refusal("other", "p", "", 32, per_principal=2) is None  # another upstream: its own count
    quota.closed("t0")
    assert quota.refusal("kids", "p", "", 32, per_principal=2) is None
