"""What creating a tenant can refuse."""

from __future__ import annotations

from streams.errors import DcbError, ValidationError


class TenantNameError(ValidationError):
    """A tenant name that could overlap another's prefix or the admin's principal."""

    code = "tenant_invalid"


class NoAdminLoginError(DcbError):
    """Creating a tenant needs the super user of a secure broker."""

    code = "no_admin_login"
