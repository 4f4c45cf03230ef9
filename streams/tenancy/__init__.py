"""Tenants enforced by the broker: a topic prefix, a SCRAM principal, prefixed ACLs."""

from streams.tenancy.tenant import Tenant

__all__ = ["Tenant"]
