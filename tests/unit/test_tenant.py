"""A tenant's names and grants: every name it uses lies under its prefix, and no
tenant's prefix covers another's names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.connection import KafkaConnection
from streams.tenancy.exceptions import TenantNameError
from streams.tenancy.tenant import NAME, Resource, Tenant

names = st.from_regex(NAME, fullmatch=True).filter(lambda n: n not in {"admin", "dcb"})


@pytest.mark.parametrize("name", ["acme.eu", "Acme", "admin", "dcb", "", "9lives", "a" * 49, "a b"])
def test_names_that_could_overlap_or_impersonate_are_refused(name: str) -> None:
    with pytest.raises(TenantNameError) as caught:
        Tenant.named(name)
    assert caught.value.code == "tenant_invalid"


@given(names, names)
def test_no_tenant_prefix_covers_another_tenants_names(a: str, b: str) -> None:
    one, other = Tenant.named(a), Tenant.named(b)
    if a != b:
        assert not other.app_id.startswith(one.prefix)
        assert not f"{other.prefix}events".startswith(one.prefix)


@given(names)
def test_every_name_a_tenant_uses_is_granted_by_its_prefixed_acls(name: str) -> None:
    tenant = Tenant.named(name)
    env = tenant.client_env(KafkaConnection("h:1", "SASL_PLAINTEXT", username=name, password="p"))
    granted = dict(tenant.grants())
    assert set(granted) == set(Resource)
    assert env["DCB_TOPICS__PREFIX"].startswith(granted[Resource.TOPIC])
    assert env["DCB_WORKER__APP_ID"].startswith(granted[Resource.GROUP])
    assert env["DCB_WORKER__APP_ID"].startswith(granted[Resource.TRANSACTIONAL_ID])
    assert env["DCB_SECURITY__USERNAME"] == name
    assert env["DCB_SECURITY__PROTOCOL"] == "SASL_PLAINTEXT"
